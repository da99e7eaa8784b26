package server_test

import (
	"time"

	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestMCPShapedPageResultsPassThrough: sites written for MCP-B return MCP tool results. Every
// content type reaches the agent as that type (an image used to arrive as its JSON text),
// structuredContent too; the page's own _meta does not (that is where the server speaks), and
// what is not MCP-shaped is its JSON text.
func TestMCPShapedPageResultsPassThrough(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	call := func(result any) *mcp.CallToolResult {
		t.Helper()
		ch, cancel := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}})
		defer cancel()
		m, err := w.br.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatal(err)
		}
		w.br.Dispatched(m.ID, "d1")
		w.br.Result(m.ID, result)
		return awaitCall(t, ch)
	}
	res := call(map[string]any{
		"content": []map[string]any{
			{"type": "text", "text": "a cup", "_meta": map[string]any{"tabbridge/untrustedContent": false}},
			{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
			{"type": "resource_link", "uri": "https://shop.example/tea/1", "name": "tea-1"},
		},
		"structuredContent": map[string]any{"count": 1},
		"_meta":             map[string]any{"tabbridge/untrustedContent": false},
	})
	if res.IsError || len(res.Content) != 3 || res.Meta != nil {
		t.Fatalf("result = %+v", res)
	}
	text, ok1 := res.Content[0].(*mcp.TextContent)
	img, ok2 := res.Content[1].(*mcp.ImageContent)
	link, ok3 := res.Content[2].(*mcp.ResourceLink)
	if !ok1 || !ok2 || !ok3 || text.Text != "a cup" || text.Meta != nil || img.MIMEType != "image/png" || string(img.Data) != "\x89PNG\r\n\x1a\n" || link.URI != "https://shop.example/tea/1" {
		t.Fatalf("content = %#v %#v %#v", res.Content[0], res.Content[1], res.Content[2])
	}
	if sc, ok := res.StructuredContent.(map[string]any); !ok || sc["count"] != 1.0 {
		t.Fatalf("structuredContent = %#v", res.StructuredContent)
	}
	// The page's own error result stays an error.
	if res := call(map[string]any{"content": []map[string]any{{"type": "text", "text": "out of stock"}}, "isError": true}); !res.IsError || servertest.ResultText(res) != "out of stock" {
		t.Fatalf("isError result = %+v", res)
	}
	// Not MCP: an unknown item type, image data that is not base64.
	for _, r := range []any{
		map[string]any{"content": []map[string]any{{"type": "video", "url": "x"}}},
		map[string]any{"content": []map[string]any{{"type": "image", "data": "not base64!", "mimeType": "image/png"}}},
	} {
		if res := call(r); res.IsError || len(res.Content) != 1 || servertest.ResultText(res)[0] != '{' {
			t.Fatalf("non-MCP result %v = %+v", r, res)
		}
	}
}
