package bridge

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// everyMessage builds one of every message the server sends a browser, with s in each string
// field (the call, which carries JSON through, is checkEncodeCall's).
func everyMessage(s string) []any {
	site := Site{ID: s, Origin: s, WorkspaceID: s, WorkspaceName: s}
	msgs := []any{
		welcomeMsg{Type: TypeWelcome, ID: s, Protocol: 1, BrowserID: s, Name: s, SharedSites: []Site{site}},
		pongMsg{Type: TypePong, ID: s},
		sitesMsg{Type: TypeSites, SharedSites: []Site{site}},
		browserMsg{Type: TypeBrowser, Name: s},
		errorMsg{Type: TypeError, Code: s, Message: s, Ref: s},
		toolsAccepted{Type: TypeToolsAccepted, Ref: s, DocumentID: s, Accepted: []string{s}, Refused: []refusedOut{{Tool: s, Reason: s}}},
		cancelMsg{Type: TypeCallCancel, CallID: s, Reason: s},
		ApprovalsMsg{Type: TypeApprovals, Event: s, Request: &ApprovalRef{ID: s, Tool: s, Site: s, TaskID: s}},
	}
	return msgs
}

// FuzzEncode checks the invariant of every frame to a browser: valid UTF-8 JSON text, whatever
// the strings and JSON inside it hold (issue 11, item 2: Chromium fails the whole socket on a
// text frame that is not UTF-8).
func FuzzEncode(f *testing.F) {
	f.Add("plain", []byte(`{"a":"b"}`))
	f.Add("bad \xff byte", []byte("{\"a\":\"\xc3\"}"))
	f.Add("\xed\xa0\x80 surrogate", []byte("[\"\xed\xa0\x80\",\"\\ud800\"]"))
	f.Add("</script>\u2028", []byte(`"\u0000"`))
	f.Add("", []byte("not json \xff"))
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		for _, m := range everyMessage(s) {
			b := encode(m)
			if !utf8.Valid(b) || !json.Valid(b) {
				t.Fatalf("encode %T gave a frame that is not UTF-8 JSON text: %q", m, b)
			}
		}
		checkEncodeCall(t, s, raw)
	})
}

// checkEncodeCall: a call is sent with its arguments as given (compact, with encoding/json's
// HTML escapes, which JSON reads back the same), or refused; never repaired.
func checkEncodeCall(t *testing.T, s string, raw []byte) {
	b, err := encodeCall(callMsg{Type: TypeCall, ID: s, Site: s, Tool: s, Arguments: raw, URL: s})
	if !utf8.Valid(raw) || !json.Valid(raw) {
		if err == nil {
			t.Fatalf("call with arguments %q was encoded: %q", raw, b)
		}
		return
	}
	if err != nil {
		t.Fatalf("call with valid arguments %q refused: %v", raw, err)
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("call frame is not UTF-8 JSON text: %q", b)
	}
	var back struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var compact, want bytes.Buffer
	json.Compact(&compact, raw)
	json.HTMLEscape(&want, compact.Bytes()) // as encoding/json writes a RawMessage: the same JSON
	if !bytes.Equal(back.Arguments, want.Bytes()) {
		t.Fatalf("arguments changed on the way: sent %q, framed %q", want.Bytes(), back.Arguments)
	}
}
