package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// answerCalls makes a test browser answer every call at once, until its
// socket closes.
func answerCalls(br *bridgetest.Browser) {
	for {
		m, err := br.Next(time.Hour)
		if err != nil {
			return
		}
		if m.Type == "call" {
			br.Send(map[string]any{"type": "call.result", "callId": m.ID, "ok": true, "result": "ok"})
		}
	}
}

// echoServer is the baseline: a bare WebSocket echo on loopback, the hop a
// call makes to the browser and back with nothing of ours on it.
func echoServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := websocket.Upgrader{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			t, p, err := c.ReadMessage()
			if err != nil || c.WriteMessage(t, p) != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "ws://" + ln.Addr().String()
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// BenchmarkCallSiteTool measures a read-only callSiteTool through the real
// MCP endpoint to a test browser that answers at once, against a bare
// WebSocket echo measured in the same run; it reports p50/p99 of both, what
// the server adds, and calls per second from 16 concurrent agents.
//
//	go test ./server -run XXX -bench CallSiteTool -benchtime 2000x
//
// TABBRIDGE_BENCH_DB=postgres runs it on the test PostgreSQL instead of SQLite.
func BenchmarkCallSiteTool(b *testing.B) {
	kind := storetest.SQLite
	if os.Getenv("TABBRIDGE_BENCH_DB") == "postgres" {
		kind = storetest.Postgres
	}
	w := newSiteWorld(b, kind, nil, nil)
	w.announce(b, "d1", time.Now())
	go answerCalls(w.br)
	args := map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}}
	call := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "callSiteTool", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %v", err, res)
		}
		return time.Since(start)
	}
	echo, _, err := websocket.DefaultDialer.Dial(echoServer(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Close()
	frame, _ := json.Marshal(map[string]any{"type": "call.result", "callId": "x", "ok": true, "result": "ok"})
	bare := func() time.Duration {
		start := time.Now()
		echo.WriteMessage(websocket.TextMessage, frame)
		if _, _, err := echo.ReadMessage(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := 0; i < 50; i++ { // warm up
		call(w.agent)
		bare()
	}
	b.ResetTimer()
	calls := make([]time.Duration, 0, b.N)
	echoes := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		calls = append(calls, call(w.agent))
	}
	cpuPerCall := (cpuTime() - cpu0) / time.Duration(b.N)
	for i := 0; i < b.N; i++ {
		echoes = append(echoes, bare())
	}
	b.StopTimer()
	// CPU time per call (agent, server and test browser together, all in this
	// process) is steadier than wall time on a shared machine.
	b.ReportMetric(float64(cpuPerCall.Microseconds()), "cpu-µs/call")
	c50, c99 := percentile(calls, 0.50), percentile(calls, 0.99)
	e50, e99 := percentile(echoes, 0.50), percentile(echoes, 0.99)
	b.ReportMetric(float64(c50.Microseconds()), "call-p50-µs")
	b.ReportMetric(float64(c99.Microseconds()), "call-p99-µs")
	b.ReportMetric(float64(e50.Microseconds()), "echo-p50-µs")
	b.ReportMetric(float64(e99.Microseconds()), "echo-p99-µs")
	b.ReportMetric(float64((c50 - e50).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((c99 - e99).Microseconds()), "added-p99-µs")
	b.ReportMetric(throughput(b, w, call), "calls/s")
}

// throughput runs 16 agents, each with its own MCP session, for a second.
func throughput(b *testing.B, w *siteWorld, call func(*mcp.ClientSession) time.Duration) float64 {
	const agents = 16
	sessions := make([]*mcp.ClientSession, agents)
	for i := range sessions {
		sessions[i] = w.env.MCP(b, w.token, nil)
	}
	return callRate(sessions, call)
}

// callRate has every session call back to back for two seconds, at once,
// and returns the calls per second they made together.
func callRate(sessions []*mcp.ClientSession, call func(*mcp.ClientSession) time.Duration) float64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for time.Since(start) < 2*time.Second {
				call(cs)
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}
