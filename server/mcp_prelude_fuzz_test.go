package server

import (
	"bytes"
	"encoding/json"
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
