package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzExactFields: whatever body a client sends, the check of its member
// names never panics, and a body it lets through names each member once,
// exactly as the struct does — so every reader of those bytes reads the same
// object the handler decoded.
func FuzzExactFields(f *testing.F) {
	f.Add([]byte(`{"site":"https://a.example","tool":"t"}`))
	f.Add([]byte(`{"site":"https://a.example","Site":"https://b.example"}`))
	f.Add([]byte(`{"site":"a","site":"b"}`))
	f.Add([]byte(`{"arguments":{"x":1,"x":2},"taskId":"t"}`))
	f.Add([]byte(`{"si\u0074e":"a"}`))
	f.Add([]byte(`[{"site":"a"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var in struct {
			Site      string          `json:"site"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
			TaskID    string          `json:"taskId"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if dec.Decode(&in) != nil {
			return // decodeJSON refuses it before the check runs
		}
		if exactFields(body, &in) != nil {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(body, &members) != nil {
			return // not an object (or with trailing data): decodeJSON refuses it after
		}
		// Let through: each top-level member is named exactly as the struct names it,
		// and once (a member named twice would leave fewer map entries than names).
		names := map[string]bool{"site": true, "tool": true, "arguments": true, "taskId": true}
		count := 0
		tok := json.NewDecoder(bytes.NewReader(body))
		tok.Token()
		for tok.More() {
			k, err := tok.Token()
			if err != nil {
				return
			}
			if !names[k.(string)] {
				t.Fatalf("%q let through with the member %q", body, k)
			}
			count++
			var skip json.RawMessage
			if tok.Decode(&skip) != nil {
				return
			}
		}
		if count != len(members) {
			t.Fatalf("%q let through with a member named twice", body)
		}
	})
}
