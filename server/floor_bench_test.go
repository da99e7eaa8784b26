package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"
	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// The call path at the floor (issue 16): each Tabbridge figure is measured
// beside a bare Fiber WebSocket echo of a ~300-byte JSON-RPC frame in the
// same run, and reported as a ratio to it, with the collector set as
// `tabbridge serve` ships it (GOGC=… on the command line to compare others).
// See docs/BENCHMARKS.md.

// benchKind is the database the call benchmarks run on
// (TABBRIDGE_BENCH_DB=postgres for the test PostgreSQL).
func benchKind() storetest.Kind {
	if os.Getenv("TABBRIDGE_BENCH_DB") == "postgres" {
		return storetest.Postgres
	}
	return storetest.SQLite
}

// rpcFrame is a JSON-RPC request of about 300 bytes, the size of the frame a
// call sends to the browser.
var rpcFrame = []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"callSiteTool","arguments":{"site":"https://shop.example","tool":"search","arguments":{"q":"green tea","limit":10,"sort":"price"},"taskId":"01JZ0000000000000000000000"},"_meta":{"progressToken":"p-12345"}},"pad":"` + strings.Repeat("x", 16) + `"}`)

// fiberEcho starts the floor: the Fiber + gofiber/contrib/websocket stack
// the server's extension socket uses, whose handler writes each frame back.
func fiberEcho(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/echo", websocket.New(func(c *websocket.Conn) {
		for {
			t, p, err := c.ReadMessage()
			if err != nil || c.WriteMessage(t, p) != nil {
				return
			}
		}
	}, websocket.Config{ReadBufferSize: 1024, WriteBufferSize: 1024}))
	go app.Listener(ln)
	b.Cleanup(func() { app.Shutdown() })
	return "ws://" + ln.Addr().String() + "/echo"
}

// echoClient dials the floor and returns one round trip of rpcFrame.
func echoClient(b *testing.B, url string) (roundTrip func() time.Duration) {
	c, _, err := fws.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return func() time.Duration {
		start := time.Now()
		if err := c.WriteMessage(fws.TextMessage, rpcFrame); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
}

// shippedGC sets the collector as `tabbridge serve` does by default, unless
// GOGC or GOMEMLIMIT is set (to compare settings; TABBRIDGE_GC_HEADROOM=off
// for a fixed percentage), for the benchmark's life.
func shippedGC(b *testing.B) {
	if os.Getenv("GOGC") == "" {
		prev := debug.SetGCPercent(server.DefaultGCPercent)
		b.Cleanup(func() { debug.SetGCPercent(prev) })
		if os.Getenv("TABBRIDGE_GC_HEADROOM") != "off" {
			b.Cleanup(server.TuneGC(server.DefaultGCPercent, server.DefaultGCHeadroom))
		}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		prev := debug.SetMemoryLimit(server.DefaultMemoryLimit)
		b.Cleanup(func() { debug.SetMemoryLimit(prev) })
	}
}

// sdkAlone is a second floor: the MCP SDK's own Streamable HTTP handler
// (stateful, as the server runs it) on net/http, with one tool that answers
// callSiteTool's arguments with a constant result, and nothing of
// Tabbridge's: no Fiber, token, validation, gate, audit or browser. It
// returns how to open one more agent session to it. What a call costs here
// is what the SDK's client and server cost by themselves on this machine.
func sdkAlone(b *testing.B) (open func() *mcp.ClientSession) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-alone", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "callSiteTool", InputSchema: callToolSchemaJSON},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"results":["green tea"]}`}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(ts.Close)
	return func() *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "sdk-alone-agent", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
}

// callToolSchemaJSON is an input schema of callSiteTool's shape for sdkAlone.
var callToolSchemaJSON = json.RawMessage(`{"type":"object","properties":{"site":{"type":"string"},"tool":{"type":"string"},"arguments":{"type":"object"},"taskId":{"type":"string"}},"required":["site","tool"]}`)

// callWorld is a server with one test browser answering every call at once,
// one site with docs open documents, and the agent's call.
func callWorld(b *testing.B, docs int, tweak func(*server.Options)) (*siteWorld, func(*mcp.ClientSession) time.Duration) {
	shippedGC(b)
	w := newSiteWorld(b, benchKind(), tweak, nil)
	now := time.Now()
	for i := 0; i < docs; i++ {
		// The called document is the most recently used; the rest are older.
		w.announce(b, fmt.Sprintf("d%d", i), now.Add(-time.Duration(i)*time.Second))
	}
	go answerCalls(w.br)
	args := map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}}
	call := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "callSiteTool", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %s", err, servertest.ResultText(res))
		}
		return time.Since(start)
	}
	return w, call
}

// BenchmarkCallGapped: calls 2 ms apart, each followed (2 ms later) by one
// round trip of the floor and then one call of sdkAlone, so all three see
// the same machine; p50 and p99 of each and their ratios to the floor.
//
//	go test ./server -run XXX -bench CallGapped -benchtime 2000x
func BenchmarkCallGapped(b *testing.B) {
	w, call := callWorld(b, 1, nil)
	bare := echoClient(b, fiberEcho(b))
	sdk := sdkAlone(b)()
	for i := 0; i < 50; i++ { // warm up
		call(w.agent)
		bare()
		call(sdk)
	}
	calls := make([]time.Duration, 0, b.N)
	echoes := make([]time.Duration, 0, b.N)
	sdkCalls := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(2 * time.Millisecond)
		calls = append(calls, call(w.agent))
		time.Sleep(2 * time.Millisecond)
		echoes = append(echoes, bare())
		time.Sleep(2 * time.Millisecond)
		sdkCalls = append(sdkCalls, call(sdk))
	}
	b.StopTimer()
	reportLatency(b, calls, echoes)
	// The SDK by itself, gapped the same way, to the same echo.
	s50, s99 := percentile(sdkCalls, 0.50), percentile(sdkCalls, 0.99)
	b.ReportMetric(float64(s50.Microseconds()), "sdk-p50-µs")
	b.ReportMetric(float64(s99.Microseconds()), "sdk-p99-µs")
	b.ReportMetric(float64(s50)/float64(percentile(echoes, 0.50)), "sdk-p50-ratio")
	b.ReportMetric(float64(s99)/float64(percentile(echoes, 0.99)), "sdk-p99-ratio")
}

func reportLatency(b *testing.B, calls, echoes []time.Duration) {
	c50, c99 := percentile(calls, 0.50), percentile(calls, 0.99)
	e50, e99 := percentile(echoes, 0.50), percentile(echoes, 0.99)
	b.ReportMetric(float64(c50.Microseconds()), "call-p50-µs")
	b.ReportMetric(float64(c99.Microseconds()), "call-p99-µs")
	b.ReportMetric(float64(e50.Microseconds()), "echo-p50-µs")
	b.ReportMetric(float64(e99.Microseconds()), "echo-p99-µs")
	b.ReportMetric(float64(c50)/float64(e50), "p50-ratio")
	b.ReportMetric(float64(c99)/float64(e99), "p99-ratio")
}

// BenchmarkCallThroughput: 16 agents (TABBRIDGE_BENCH_AGENTS), each with
// its own MCP session, call back to back for 2 s; then as many clients of
// the floor do the same, then as many agents of sdkAlone. Reports the rates,
// the ratio of the first two, and each one's CPU.
//
//	go test ./server -run XXX -bench CallThroughput -benchtime 1x
func BenchmarkCallThroughput(b *testing.B) {
	agents := 16
	if n, err := strconv.Atoi(os.Getenv("TABBRIDGE_BENCH_AGENTS")); err == nil && n > 0 {
		agents = n
	}
	// One browser runs at most DefaultMaxCalls at once; more agents than
	// that would measure its busy refusals.
	w, call := callWorld(b, 1, func(o *server.Options) { o.Bridge.MaxCalls = max(agents, 32) })
	url := fiberEcho(b)
	sessions := make([]*mcp.ClientSession, agents)
	echoes := make([]func() time.Duration, agents)
	for i := range sessions {
		sessions[i] = w.env.MCP(b, w.token, nil)
		echoes[i] = echoClient(b, url)
	}
	open := sdkAlone(b)
	sdk := make([]*mcp.ClientSession, agents)
	for i := range sdk {
		sdk[i] = open()
	}
	var calls, floor, sdkRate float64
	var callCPU, echoCPU, sdkCPU time.Duration
	var callN, echoN, sdkN int
	for i := 0; i < b.N; i++ {
		cpu0 := cpuTime()
		r, n := rate(agents, func(k int) { call(sessions[k]) })
		callCPU, calls, callN = callCPU+cpuTime()-cpu0, calls+r, callN+n
		cpu0 = cpuTime()
		r, n = rate(agents, func(k int) { echoes[k]() })
		echoCPU, floor, echoN = echoCPU+cpuTime()-cpu0, floor+r, echoN+n
		cpu0 = cpuTime()
		r, n = rate(agents, func(k int) { call(sdk[k]) })
		sdkCPU, sdkRate, sdkN = sdkCPU+cpuTime()-cpu0, sdkRate+r, sdkN+n
	}
	b.ReportMetric(calls/float64(b.N), "calls/s")
	b.ReportMetric(floor/float64(b.N), "echo-trips/s")
	b.ReportMetric(calls/floor, "ratio")
	// CPU per call (agent, server and browser together): on a loaded
	// machine the rate shows the share of the cores the run got, this
	// what a call costs.
	b.ReportMetric(float64(callCPU.Microseconds())/float64(callN), "cpu-µs/call")
	b.ReportMetric(float64(echoCPU.Microseconds())/float64(echoN), "cpu-µs/echo")
	// The SDK's client and server by themselves (sdkAlone): the most calls
	// these cores carry through the SDK with nothing of Tabbridge's.
	b.ReportMetric(sdkRate/float64(b.N), "sdk-calls/s")
	b.ReportMetric(float64(sdkCPU.Microseconds())/float64(sdkN), "cpu-µs/sdk-call")
}

// rate runs n workers doing one thing back to back for 2 s and returns how
// many they did per second together, and how many in all.
func rate(n int, do func(worker int)) (float64, int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	start := time.Now()
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			done := 0
			for time.Since(start) < 2*time.Second {
				do(k)
				done++
			}
			mu.Lock()
			total += done
			mu.Unlock()
		}(k)
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds(), total
}

// BenchmarkCallOpenDocuments: the call, back to back, with 1 to 1,000 open
// documents of the called site; a call should cost the same.
//
//	go test ./server -run XXX -bench CallOpenDocuments -benchtime 1000x
func BenchmarkCallOpenDocuments(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("docs=%d", n), func(b *testing.B) {
			// One browser announcing a thousand documents back to back is over
			// its announcement pace (bridge/pace.go); the benchmark is the call.
			w, call := callWorld(b, n, func(o *server.Options) { o.Bridge.AnnouncePace = bridge.Pace{PerSecond: 1e6, Burst: 1 << 20} })
			for i := 0; i < 50; i++ {
				call(w.agent)
			}
			calls := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				calls = append(calls, call(w.agent))
			}
			cpu := (cpuTime() - cpu0) / time.Duration(b.N)
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds()), "cpu-µs/call")
			b.ReportMetric(float64(percentile(calls, 0.5).Microseconds()), "call-p50-µs")
		})
	}
}
