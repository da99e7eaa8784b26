package server

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tabbridge/tabbridge/live"
)

// FuzzEventFrame checks the invariant of the live event stream: every frame is UTF-8 text, one
// event with one data line of JSON, whatever the strings and raw JSON in its data hold.
func FuzzEventFrame(f *testing.F) {
	f.Add("task.updated", "Buy tea", []byte(`{"a":1}`))
	f.Add("call.finished", "bad \xff byte", []byte("{\"args\":\"\xc3\"}"))
	f.Add("x", "line\nbreak\r\u2028", []byte("[\"\xed\xa0\x80\"]"))
	f.Add("two\nlines", "", []byte(`null`))
	f.Fuzz(func(t *testing.T, typ, s string, raw []byte) {
		data := map[string]any{"title": s, "n": 1}
		if json.Valid(raw) {
			data["raw"] = json.RawMessage(raw)
		}
		frame, err := eventFrame(live.Event{Type: typ, Data: data})
		if err != nil {
			if typ != "" && !strings.ContainsAny(typ, "\r\n") && utf8.ValidString(typ) {
				t.Fatalf("event %q refused: %v", typ, err)
			}
			return
		}
		if !utf8.ValidString(frame) {
			t.Fatalf("frame is not UTF-8: %q", frame)
		}
		lines := strings.Split(strings.TrimSuffix(frame, "\n\n"), "\n")
		if len(lines) != 2 || lines[0] != "event: "+typ || !strings.HasPrefix(lines[1], "data: ") || !json.Valid([]byte(lines[1][6:])) {
			t.Fatalf("frame is not one event with one line of JSON: %q", frame)
		}
	})
}
