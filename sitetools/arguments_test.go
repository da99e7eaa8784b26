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
