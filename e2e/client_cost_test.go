package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// TestClientCostBesideGo times the official MCP TypeScript SDK client (e2e/mcpclient/cost.mjs)
// and the go-sdk client against the same server and the same Go test browser, each beside a bare
// HTTP GET from its own process (issue 16): a ping (no tool, no browser) and a callSiteTool. It
// places what a call "from an MCP client" costs in TestCallBesideMCPB: most of the difference
// between the two clients is the TypeScript client's own Streamable HTTP transport (fetch, the
// SSE parser, its schema checks), not the server. It fails when a call fails; it logs p50 and p99,
// and TABBRIDGE_BENCH_CALLS makes it a benchmark:
//
//	TABBRIDGE_BENCH_CALLS=2000 go test ./e2e -run TestClientCostBesideGo -v -count=1
func TestClientCostBesideGo(t *testing.T) {
	dir := tsClientDir(t)
	calls := envInt("TABBRIDGE_BENCH_CALLS", 50)
	w := newTSClientWorld(t, "client-cost-browser",
		`[{"name":"search","description":"Search","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]`,
		"results for ")

	out, err := runNode(dir, 5*time.Minute, "--no-warnings", "cost.mjs", w.env.URL, w.token, tsSite, strconv.Itoa(calls))
	if err != nil {
		t.Fatal(err)
	}
	type stats struct{ P50, P99 float64 }
	var ts struct{ Ping, Call, Fetch stats }
	if err := json.Unmarshal(out, &ts); err != nil {
		t.Fatalf("client printed %s: %v", out, err)
	}

	ctx := context.Background()
	cs := w.env.MCP(t, w.token, nil)
	timed := func(f func() error) stats {
		for i := 0; i < (calls+9)/10; i++ {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		d := make([]float64, calls)
		for i := range d {
			start := time.Now()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			d[i] = float64(time.Since(start)) / float64(time.Millisecond)
		}
		slices.Sort(d)
		return stats{d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]}
	}
	goPing := timed(func() error { return cs.Ping(ctx, nil) })
	goCall := timed(func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool", Arguments: map[string]any{"site": tsSite, "tool": "search", "arguments": map[string]any{"q": "tea"}}})
		if err == nil && res.IsError {
			t.Fatalf("callSiteTool failed: %s", servertest.ResultText(res))
		}
		return err
	})
	goGet := timed(func() error {
		r, err := http.Get(w.env.URL + "/healthz")
		if err != nil {
			return err
		}
		r.Body.Close()
		return nil
	})
	t.Logf("%d each, p50 / p99 ms: TypeScript SDK client: ping %.3f / %.3f, call %.3f / %.3f, bare fetch %.3f / %.3f",
		calls, ts.Ping.P50, ts.Ping.P99, ts.Call.P50, ts.Call.P99, ts.Fetch.P50, ts.Fetch.P99)
	t.Logf("%d each, p50 / p99 ms: go-sdk client: ping %.3f / %.3f, call %.3f / %.3f, bare GET %.3f / %.3f",
		calls, goPing.P50, goPing.P99, goCall.P50, goCall.P99, goGet.P50, goGet.P99)
}
