package sitetools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestValidateRefusesNonUTF8 is the first guard of issue 11's item 2: arguments reach the
// browser as the agent wrote them, so bytes that are not UTF-8 must be refused here, with where.
func TestValidateRefusesNonUTF8(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, path, where string }{
		{"{\"title\":\"ab\xffc\"}", "arguments.title", "a string holds bytes that are not valid UTF-8 (at byte 12 of the arguments)"},
		{"{\"a\":[1,{\"b\":[\"x\",\"\xc3\"]}]}", "arguments.a[1].b[1]", "(at byte 19 of"},
		{"{\"ok\":\"é\",\"k\xe2\x82\":1}", "arguments", "a property name holds bytes"},
		{"{\"a\":{\"odd key\":{\"x\xed\xa0\x80\":2}}}", `arguments.a["odd key"]`, "a property name"},
		{"{\"t\":\"\xf0\x9f\x98\"}", "arguments.t", "at byte 6"},
	} {
		_, aerr := s.Check(json.RawMessage(tc.args))
		if aerr == nil || aerr.Code != CodeArgumentsNotUTF8 {
			t.Fatalf("%q: got %v, want a refusal for bytes that are not UTF-8", tc.args, aerr)
		}
		if aerr.Path != tc.path || !strings.Contains(aerr.Message, tc.where) || !strings.Contains(aerr.Message, "send text as UTF-8") {
			t.Errorf("%q: got %s, want path %s and %q", tc.args, aerr, tc.path, tc.where)
		}
	}
	if v, aerr := s.Check(json.RawMessage(`{"t":"é😀\ud83d\ude00\\ud800\u0041"}`)); aerr != nil || len(v) != 0 {
		t.Fatalf("valid text refused: %v %v", v, aerr)
	}
	// A lone surrogate escape is ASCII but no character: the server would validate and show
	// U+FFFD, a browser's parser keeps the lone half.
	for args, path := range map[string]string{`{"t":"ab\ud800"}`: "arguments.t", `{"t":["\udc00x"]}`: "arguments.t[0]",
		`{"a":{"\ud83dk":1}}`: "arguments.a", `{"t":"\ud800\ud800"}`: "arguments.t", `{"t":"\\\ud800"}`: "arguments.t"} {
		_, aerr := s.Check(json.RawMessage(args))
		if aerr == nil || aerr.Code != CodeArgumentsNotUTF8 || aerr.Path != path || !strings.Contains(aerr.Message, "half of a UTF-16 surrogate pair") {
			t.Errorf("%s: got %v, want a refusal at %s", args, aerr, path)
		}
	}
}

// FuzzDecodeArguments: any text an agent sends is decoded into an object or refused as a whole
// with a code and a path; text that is not UTF-8 is always refused as such, at its first bad byte.
func FuzzDecodeArguments(f *testing.F) {
	f.Add([]byte(`{"title":"abc","items":[{"title":4}]}`))
	f.Add([]byte("{\"a\":[1,{\"b\":[\"x\",\"\xc3\"]}]}"))
	f.Add([]byte("{\"k\xe2\x82\":1}"))
	f.Add([]byte("[\"\xff\"]"))
	f.Add([]byte("\xff{}"))
	f.Add([]byte(`{"a":"\ud800"}`))
	f.Add([]byte(`{"a":`))
	f.Add([]byte(`{"a":1,"b":{"a":2,"a":3}}`))
	f.Add([]byte(`{"a":"\"}\",","b":[{"c":1},{"c":1}]}`))
	f.Fuzz(func(t *testing.T, args []byte) {
		value, aerr := decodeArguments(args)
		if aerr == nil {
			if _, ok := value.(map[string]any); !ok {
				t.Fatalf("decoded %q into %T", args, value)
			}
			if _, key := duplicateKey(bytes.TrimSpace(args)); key != "" {
				t.Fatalf("accepted %q, which names %q twice in one object", args, key)
			}
			if !utf8.Valid(args) {
				t.Fatalf("accepted %q, which is not UTF-8", args)
			}
			return
		}
		if aerr.Message == "" || !strings.HasPrefix(aerr.Path, "arguments") {
			t.Fatalf("bad refusal %#v", aerr)
		}
		trimmed := bytes.TrimSpace(args)
		if len(trimmed) <= MaxArgumentsBytes && !utf8.Valid(trimmed) {
			at := fmt.Sprintf("at byte %d of", firstInvalidUTF8(trimmed))
			if aerr.Code != CodeArgumentsNotUTF8 || !strings.Contains(aerr.Message, at) {
				t.Fatalf("%q: got %v, want a refusal %s", args, aerr, at)
			}
		}
	})
}

// FuzzMeasureMembers: measure counts the members of objects in any text as objectMembers, the
// pass over the text it replaced, did (kept here as the reference), and on JSON text as its tokens
// do.
func FuzzMeasureMembers(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"a":2,"a":3}}`))
	f.Add([]byte(`{"a":"\"}\",","b":[{"c":1},{"c":1}],"d":[],"e":{}}`))
	f.Add([]byte(`[[[[{"x":[{"y":{}}]}]]]]`))
	f.Add([]byte(` { "a" : [ 1 , { } , "}" ] } `))
	f.Add([]byte(`{"a":1}]{]`))
	f.Add([]byte(`0}0{0`))
	f.Fuzz(func(t *testing.T, text []byte) {
		got := measure(text).members
		if want := objectMembers(text); got != want {
			t.Fatalf("%q: measure counts %d members, objectMembers %d", text, got, want)
		}
		if json.Valid(text) {
			if keys := propertyNames(text); got != keys {
				t.Fatalf("%q: measure counts %d members, the text has %d property names", text, got, keys)
			}
		}
	})
}

// propertyNames counts the property names in JSON text, by its tokens.
func propertyNames(text []byte) int {
	dec := json.NewDecoder(bytes.NewReader(text))
	var stack []pathFrame
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if d, ok := tok.(json.Delim); ok {
			stack = pushPop(stack, d)
			continue
		}
		if top := len(stack) - 1; top >= 0 && stack[top].object && !stack[top].keyed {
			stack[top].keyed = true
			n++
			continue
		}
		stack = advance(stack)
	}
}

// objectMembers counts the members of every object in JSON text, in one pass over the bytes.
// Decoding into maps keeps one member per name, so a count above the decoded one means some
// object names a property twice: the validator saw one value (the last), the approval card's
// JSON shows both, and a page's parser may take either.
func objectMembers(text []byte) int {
	var inObject []bool // per open container: is it an object
	n, inString, escaped, opened := 0, false, false, false
	for _, c := range text {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		top := len(inObject) > 0 && inObject[len(inObject)-1]
		if (opened && c != '}') || (c == ',' && top) {
			if top {
				n++
			}
		}
		opened = false
		switch c {
		case '"':
			inString = true
		case '{', '[':
			inObject = append(inObject, c == '{')
			opened = c == '{'
		case '}', ']':
			if len(inObject) > 0 {
				inObject = inObject[:len(inObject)-1]
			}
		}
	}
	return n
}

func TestBitStack(t *testing.T) {
	var b bitStack
	var want []bool
	for i := 0; i < 1000; i++ {
		v := i%3 == 0 || i%7 == 0
		b.push(v)
		want = append(want, v)
	}
	for len(want) > 0 {
		if b.top() != want[len(want)-1] {
			t.Fatalf("at %d: top is %v, want %v", len(want), b.top(), want[len(want)-1])
		}
		b.pop()
		want = want[:len(want)-1]
	}
	if b.top() {
		t.Fatal("empty stack's top is true")
	}
}

// TestArgumentsWithTextAfterThemRefused: arguments are one JSON object and nothing after it;
// {"a":1}]x was taken as {"a":1}, though no other parser reads it so.
func TestArgumentsWithTextAfterThemRefused(t *testing.T) {
	for _, args := range []string{`{"a":1}]x`, `{"a":1}}`, `{"a":1} ]]]`, `{"a":1}{}`, `{"a":1} 2`} {
		if _, aerr := decodeArguments([]byte(args)); aerr == nil || aerr.Code != CodeInvalidArguments || !strings.Contains(aerr.Message, "not valid JSON") {
			t.Errorf("%s: got %v, want a refusal as not valid JSON", args, aerr)
		}
	}
	if _, aerr := decodeArguments([]byte(" {\"a\":1} \n")); aerr != nil {
		t.Errorf("white space around the object refused: %v", aerr)
	}
}
