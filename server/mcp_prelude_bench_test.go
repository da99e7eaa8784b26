package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkParseMCPBody: the prelude's cost on a callSiteTool call with 1 MiB of arguments
// (the text is read once by the SDK anyway; this is what the server adds before it).
func BenchmarkParseMCPBody(b *testing.B) {
	item := `{"name":"tea","qty":3,"note":"` + strings.Repeat("x", 200) + `"},`
	args := "[" + strings.TrimSuffix(strings.Repeat(item, (1<<20)/len(item)), ",") + "]"
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"callSiteTool","arguments":{"site":"https://shop.example","tool":"buy","arguments":{"items":` + args + `}},"_meta":{"progressToken":7}}}`)
	b.Run("prelude", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, f := parseMCPBody(body); f != nil {
				b.Fatal(f.err.Message)
			}
		}
	})
	// The read the connection watch made before the prelude, for comparison.
	b.Run("watch-read-before", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
					Reason    string          `json:"reason"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) != nil {
				b.Fatal("not read")
			}
		}
	})
}
