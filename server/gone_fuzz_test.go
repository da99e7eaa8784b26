package server

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// FuzzReadMCPBody: whatever an agent POSTs, reading its JSON-RPC messages
// for the connection watch neither fails nor changes the body the SDK then
// reads, and a cancel is matched to no call but the one it names.
func FuzzReadMCPBody(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"callSiteTool","arguments":{}}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"Request timed out"}}]`))
	f.Add([]byte(`{"id":[1,2],"params":null}`))
	f.Add([]byte("\xff\xfe{"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, _ := http.NewRequest("POST", "/mcp", bytes.NewReader(body))
		msgs, _ := readMCPBody(r)
		if got, _ := io.ReadAll(r.Body); !bytes.Equal(got, body) {
			t.Fatalf("the body changed: %q became %q", body, got)
		}
		var g goneWatches
		g.noteCancels("t\x00s", msgs, func(string) { t.Fatal("a cancel matched a call that was never made") })
	})
}
