package server

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzSplitJSON: the prelude's one-pass scanners split valid JSON exactly as encoding/json
// does — the same member names, in order, with the same values, and the same array items —
// so the prelude reads the message the SDK then reads.
func FuzzSplitJSON(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":"}"}]}}}`))
	f.Add([]byte(`[{"a":"\"]"},2, "x" ,null,[[]]]`))
	f.Add([]byte(` { "\u0061" : "\\" , "b":{"c":[true,false,-1.5e3]} } `))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		switch t0 := bytes.TrimSpace(b); {
		case t0[0] == '{':
			keys, vals, ok := splitObject(b)
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.Token()
			for i := 0; dec.More(); i++ {
				k, _ := dec.Token()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				if !ok || i >= len(keys) || keys[i] != k.(string) || !bytes.Equal(bytes.TrimSpace(vals[i]), bytes.TrimSpace(v)) {
					t.Fatalf("%q: member %d is %q=%q here, %q=%q for encoding/json", b, i, keyAt(keys, i), atb(vals, i), k, v)
				}
				if i == len(keys)-1 && dec.More() {
					t.Fatalf("%q: splitObject found %d members, encoding/json more", b, len(keys))
				}
			}
		case t0[0] == '[':
			var want []json.RawMessage
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got := splitArray(b)
			if len(got) != len(want) {
				t.Fatalf("%q: %d items here, %d for encoding/json", b, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(bytes.TrimSpace(got[i]), bytes.TrimSpace(want[i])) {
					t.Fatalf("%q: item %d is %q here, %q for encoding/json", b, i, got[i], want[i])
				}
			}
		}
	})
}

func keyAt(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func atb(s [][]byte, i int) []byte {
	if i < len(s) {
		return s[i]
	}
	return nil
}

// FuzzDuplicateMember: the one-pass search for a member named twice finds what a walk of
// encoding/json's tokens finds — the same name, in the same object — on any valid JSON.
func FuzzDuplicateMember(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1,"b":2},"a":3}`), false)
	f.Add([]byte(`{"arguments":{"x":1,"x":2},"_meta":[{"p":1},{"q":{"r":1,"\u0072":2}}]}`), true)
	f.Add([]byte(`[{"a":"\",\"a\":"},{"a":1}]`), false)
	f.Add([]byte("{\"\xff\":1,\"\xfe\":2}"), false)
	f.Fuzz(func(t *testing.T, b []byte, skipArguments bool) {
		if !json.Valid(b) {
			return
		}
		skip := ""
		if skipArguments {
			skip = "arguments"
		}
		path, key := duplicateMember(b, "params", skip)
		wantPath, wantKey := duplicateByTokens(b, skip)
		if key != wantKey || path != wantPath {
			t.Fatalf("%q: found %q in %s, the token walk %q in %s", b, key, path, wantKey, wantPath)
		}
	})
}

// duplicateByTokens is the reference: encoding/json's tokens, one object's names at a time.
func duplicateByTokens(b []byte, skip string) (path, key string) {
	type frame struct {
		object bool
		seen   map[string]bool
		key    string
		keyed  bool
		index  int
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	done := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.object {
				f.keyed = false
			} else {
				f.index++
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", ""
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				stack = append(stack, &frame{object: d == '{', seen: map[string]bool{}})
			} else {
				stack = stack[:len(stack)-1]
				done()
			}
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object && !stack[n-1].keyed {
			f := stack[n-1]
			k := tok.(string)
			if f.seen[k] {
				p := "params"
				for _, g := range stack[:n-1] {
					if g.object {
						p += "." + g.key
					} else {
						p += "[" + strconv.Itoa(g.index) + "]"
					}
				}
				return p, k
			}
			f.seen[k], f.key, f.keyed = true, k, true
			if n == 1 && skip != "" && k == skip {
				var v json.RawMessage
				dec.Decode(&v)
				done()
			}
			continue
		}
		done()
	}
}
