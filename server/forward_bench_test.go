package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// benchPerson is a person whose browser is held by one instance, with an
// agent token for their shared shop.
type benchPerson struct {
	token string
	home  int // the instance holding the browser
}

func benchPeople(b *testing.B, envs []*servertest.Env) []benchPerson {
	out := make([]benchPerson, len(envs))
	for i := range envs {
		p := envs[0].Person(b, fmt.Sprintf("p%d@example.com", i))
		ws := p.Workspace("W")
		token := p.AgentToken(ws, "bench")
		p.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": ws}, 201, nil)
		br, _ := extBrowser(b, envs[i], asOn(b, envs[i], p), fmt.Sprintf("browser-%d", i))
		announceOn(b, br, "d1", time.Now())
		go answerCalls(br)
		out[i] = benchPerson{token: token, home: i}
	}
	return out
}

// BenchmarkForwardedCall measures what forwarding adds to a read-only
// callSiteTool: three real server instances in this process on the test
// PostgreSQL, a test browser on B that answers at once, and one agent on B
// (direct) and one on A (forwarded to B), called alternately so both see
// the same load. It reports p50/p99 of each and the difference; then the
// calls per second of 24 agents over three people whose browsers are on
// three instances, all direct and all forwarded.
//
//	go test ./server -run XXX -bench ForwardedCall -benchtime 2000x
func BenchmarkForwardedCall(b *testing.B) {
	envs := instances(b, 3, func(_ int, o *server.Options) { o.OpenSignup = true })
	people := benchPeople(b, envs)
	args := map[string]any{"site": shop, "tool": "search", "arguments": map[string]any{"q": "tea"}}
	call := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "callSiteTool", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %v", err, res)
		}
		return time.Since(start)
	}
	onB := people[1]
	direct, forwarded := envs[1].MCP(b, onB.token, nil), envs[0].MCP(b, onB.token, nil)
	proxied := sessionElsewhere(b, envs[1], envs[0], onB.token)
	// Wait until A routes to B (its directory has B's tab).
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := forwarded.CallTool(context.Background(), &mcp.CallToolParams{Name: "callSiteTool", Arguments: args})
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("A never routed to B: %v %v", err, res)
		}
	}
	for range 100 { // warm up
		call(direct)
		call(forwarded)
		call(proxied)
	}
	b.ResetTimer()
	d := make([]time.Duration, 0, b.N)
	f := make([]time.Duration, 0, b.N)
	p := make([]time.Duration, 0, b.N)
	for range b.N {
		d = append(d, call(direct))
		f = append(f, call(forwarded))
		p = append(p, call(proxied))
	}
	b.StopTimer()
	for i, env := range envs[:2] {
		_, body := env.NewClient(b).Do("GET", "/metrics", nil)
		if !strings.Contains(string(body), `tabbridge_forwarded_calls_total{result="ok"}`) == (i == 0) {
			b.Fatalf("instance %d forwarded calls: %v, want only A", i, i != 0)
		}
	}
	d50, d99 := percentile(d, 0.50), percentile(d, 0.99)
	p50, p99 := percentile(p, 0.50), percentile(p, 0.99)
	b.ReportMetric(float64((p50 - d50).Microseconds()), "session-elsewhere-added-p50-µs")
	b.ReportMetric(float64((p99 - d99).Microseconds()), "session-elsewhere-added-p99-µs")
	f50, f99 := percentile(f, 0.50), percentile(f, 0.99)
	b.ReportMetric(float64(d50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(d99.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(f50.Microseconds()), "fwd-p50-µs")
	b.ReportMetric(float64(f99.Microseconds()), "fwd-p99-µs")
	b.ReportMetric(float64((f50 - d50).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((f99 - d99).Microseconds()), "added-p99-µs")
	// CPU per call (agents, instances and browsers all in this process) is
	// steadier than wall time on a loaded machine: each kind on its own.
	cpuOf := func(cs *mcp.ClientSession) float64 {
		const n = 300
		c0 := cpuTime()
		for range n {
			call(cs)
		}
		return float64(((cpuTime() - c0) / n).Microseconds())
	}
	b.ReportMetric(cpuOf(direct), "direct-cpu-µs/call")
	b.ReportMetric(cpuOf(forwarded), "fwd-cpu-µs/call")
	b.ReportMetric(cpuOf(proxied), "session-elsewhere-cpu-µs/call")
	b.ReportMetric(spreadThroughput(b, envs, people, call, 0), "direct-calls/s")
	b.ReportMetric(spreadThroughput(b, envs, people, call, 1), "fwd-calls/s")
}

// sessionElsewhere connects an MCP client whose session is on owner (its
// initialize went there) and whose every later request goes to via, which
// proxies them: a balancer that moved the client after it connected.
func sessionElsewhere(b *testing.B, owner, via *servertest.Env, token string) *mcp.ClientSession {
	rr := &roundRobin{hosts: []string{owner.URL}, token: token}
	client := mcp.NewClient(&mcp.Implementation{Name: "elsewhere", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: owner.URL + "/mcp", HTTPClient: &http.Client{Transport: &moveAfterFirst{rr: rr, to: via.URL}}, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// moveAfterFirst sends the first request through rr and every later one to to.
type moveAfterFirst struct {
	rr    *roundRobin
	to    string
	moved atomic.Bool
}

func (m *moveAfterFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if !m.moved.Swap(true) {
		return m.rr.RoundTrip(r)
	}
	return (&roundRobin{hosts: []string{m.to}, token: m.rr.token}).RoundTrip(r)
}

// spreadThroughput runs 8 agents per person for two seconds, each on the
// instance shift after the one holding the person's browser (0: the same).
func spreadThroughput(b *testing.B, envs []*servertest.Env, people []benchPerson, call func(*mcp.ClientSession) time.Duration, shift int) float64 {
	var sessions []*mcp.ClientSession
	for _, p := range people {
		for range 8 {
			sessions = append(sessions, envs[(p.home+shift)%len(envs)].MCP(b, p.token, nil))
		}
	}
	for _, cs := range sessions {
		call(cs) // each route settled before the clock starts
	}
	rate := callRate(sessions, call)
	for _, cs := range sessions {
		cs.Close()
	}
	return rate
}
