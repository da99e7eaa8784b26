package servertest

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// MCPOptions adjusts the test MCP client.
type MCPOptions struct {
	// OnProgress, when set, receives every progress notification.
	OnProgress func(*mcp.ProgressNotificationClientRequest)
	// Retries is how often the client retries a dropped stream, as real
	// clients do (default none, so a test fails fast).
	Retries int
}

// MCP connects the go-sdk MCP client to the test server's /mcp endpoint with
// an agent token, as any MCP client would, and closes it when the test ends.
func (e *Env) MCP(t testing.TB, token string, o *MCPOptions) *mcp.ClientSession {
	t.Helper()
	var copts mcp.ClientOptions
	if o != nil && o.OnProgress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { o.OnProgress(r) }
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "tabbridge-test", Version: "1"}, &copts)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   e.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, cmp.Or(e.Transport, http.DefaultTransport)}},
		MaxRetries: -1,
	}
	if o != nil && o.Retries > 0 {
		transport.MaxRetries = o.Retries
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// CallTool calls an MCP tool with a deadline and returns its result.
func CallTool(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// ResultText joins the text content of a tool result.
func ResultText(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// Structured decodes a tool result's structured content into out.
func Structured(t testing.TB, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decode structured content %s: %v", b, err)
	}
}
