package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeCall: callSiteTool's input is an agent's. A refused input is an
// error that shows the shape to send; an accepted one names a site and a
// tool, carries object arguments, has no member the tool does not take nor
// any twice, and round-trips (encode, decode again: the same call).
func FuzzDecodeCall(f *testing.F) {
	for _, s := range []string{
		`{"site":"https://shop.example","tool":"search","arguments":{"q":"tea"},"taskId":"t1"}`,
		`{"site":"https://shop.example","tool":"search"}`,
		`{"site":"https://shop.example","tool":"search","arguments":null}`,
		`{"site":"https://shop.example","tool":"search","arguments":[1]}`,
		`{"site":"https://shop.example","tool":"search","arguments":"x"}`,
		`{"site":"https://shop.example","tool":"search","arguments":" {\"q\":\"tea\"} "}`,
		`{"site":"https://shop.example","tool":"search","arguments":"{\"q\":\"\ud800\"}"}`,
		`{"site":"a","site":"b","tool":"t"}`,
		`{"site":"a","tool":"t","Tool":"u"}`,
		`{"site":1,"tool":"t"}`,
		`{"site":"a","tool":"t"} {"site":"b"}`,
		`{"site":"a","tool":"t","extra":true}`,
		``, `null`, `[]`, `"x"`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := decodeCall(raw)
		if err != nil {
			if !strings.Contains(err.Error(), `Send {"site": `) {
				t.Fatalf("decodeCall(%q) error %q does not say what to send", raw, err)
			}
			return
		}
		if in.Site == "" || in.Tool == "" {
			t.Fatalf("decodeCall(%q) accepted %+v without a site or a tool", raw, in)
		}
		var args map[string]json.RawMessage
		if err := json.Unmarshal(in.Arguments, &args); err != nil || args == nil {
			t.Fatalf("decodeCall(%q) accepted arguments %q that are not an object", raw, in.Arguments)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			t.Fatalf("decodeCall(%q) accepted what is not one object: %v", raw, err)
		}
		for k := range members {
			if k != "site" && k != "tool" && k != "arguments" && k != "taskId" {
				t.Fatalf("decodeCall(%q) accepted member %q", raw, k)
			}
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeCall(again)
		if err != nil {
			t.Fatalf("decodeCall(%q) re-encoded as %q is refused: %v", raw, again, err)
		}
		if back.Site != in.Site || back.Tool != in.Tool || back.TaskID != in.TaskID || !jsonEqual(t, back.Arguments, in.Arguments) {
			t.Fatalf("decodeCall round trip: %+v became %+v", in, back)
		}
	})
}

// FuzzPageResult: a page's result is what a page says, and a page may lie.
// Whatever JSON it returns, the agent gets content that encodes, with none of
// the page's _meta (that is where the server speaks), and reading the result
// the agent got as a page result again gives the same result.
func FuzzPageResult(f *testing.F) {
	for _, s := range []string{
		`"in stock"`, `{"a":1}`, `[1,2]`, `null`, `3`, `true`,
		`{"content":[{"type":"text","text":"a cup","_meta":{"tabbridge/untrustedContent":false}},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},{"type":"resource_link","uri":"https://shop.example/tea/1","name":"tea-1"}],"structuredContent":{"count":1},"_meta":{"tabbridge/untrustedContent":false}}`,
		`{"content":[{"type":"text","text":"out of stock"}],"isError":true}`,
		`{"content":[{"type":"video","url":"x"}]}`,
		`{"content":[{"type":"image","data":"not base64!","mimeType":"image/png"}]}`,
		`{"content":[{"type":"audio","data":"AAAA","mimeType":"audio/wav"}],"structuredContent":[1]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"x","_meta":{"k":1}}}]}`,
		`{"content":[]}`, `{"content":null}`, `{"content":[null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // call.result's decoder hands on only valid JSON
		}
		res := pageResult(raw)
		if res == nil || len(res.Content) == 0 || res.Meta != nil {
			t.Fatalf("pageResult(%q) = %+v", raw, res)
		}
		for _, c := range res.Content {
			if c == nil {
				t.Fatalf("pageResult(%q) has a nil content item", raw)
			}
		}
		out, err := json.Marshal(res)
		if err != nil {
			t.Fatalf("pageResult(%q) does not encode: %v", raw, err)
		}
		var top map[string]any
		if err := json.Unmarshal(out, &top); err != nil {
			t.Fatalf("pageResult(%q) encodes as %s", raw, out)
		}
		delete(top, "structuredContent") // the page's own data, in any shape it likes
		if path := metaPath(top, ""); path != "" {
			t.Fatalf("pageResult(%q) = %s keeps the page's _meta at %s", raw, out, path)
		}
		// (compared as values: text that was not UTF-8 is sent as \ufffd, and reads back as U+FFFD)
		again, err := json.Marshal(pageResult(out))
		if err != nil || !jsonEqual(t, again, out) {
			t.Fatalf("pageResult(%q) = %s, read again = %s (%v)", raw, out, again, err)
		}
	})
}

// metaPath is where a "_meta" member is in v, or "".
func metaPath(v any, at string) string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "_meta" {
				return at + "._meta"
			}
			if p := metaPath(e, at+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := metaPath(e, fmt.Sprintf("%s[%d]", at, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
