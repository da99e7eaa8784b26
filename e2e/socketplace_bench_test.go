package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/fasthttp/websocket"
)

// BenchmarkWhereTheSocketEnds times, in one browser and one run, the hops a call would take with
// the server's socket ending in the extension's service worker (as it does: the worker's socket,
// then a runtime port to the tab's content script) and with it ending in the tab itself (a
// content script's own socket, and a page's own socket as MCP-B's relay uses), and with the
// runtime port replaced by a MessagePort the content script hands the worker through an extension
// frame ("messageport", "mprelay"): each a mean round trip of a call-sized message to an echo on
// loopback. It also logs the Origin each socket
// arrives with and whether a page whose CSP allows no connections stops a content script's
// socket — the facts a socket in the tab would be designed on (docs/BENCHMARKS.md, "Where the
// socket ends").
//
//	go test ./e2e -run XXX -bench WhereTheSocketEnds -benchtime 2000x
func BenchmarkWhereTheSocketEnds(b *testing.B) {
	var mu sync.Mutex
	origins := map[string]bool{}
	// arrivals holds, for each place a socket ends ("who" in its URL), the
	// times the echo read its messages on the socket of that place with the
	// most: the time between two is one whole round trip, timed here in Go
	// rather than by the browser's coarse performance.now().
	arrivals := map[string][]*[]time.Time{} // each socket's reads, by place
	up := websocket.Upgrader{CheckOrigin: func(r *http.Request) bool { return true }}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		origins[r.Header.Get("Origin")] = true
		mu.Unlock()
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		who := r.URL.Query().Get("who")
		at := new([]time.Time)
		mu.Lock()
		arrivals[who] = append(arrivals[who], at)
		mu.Unlock()
		for {
			kind, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			mu.Lock()
			*at = append(*at, time.Now())
			mu.Unlock()
			if c.WriteMessage(kind, msg) != nil {
				return
			}
		}
	})
	msg := `{"type":"call","callId":"c-0123456789","site":"http://127.0.0.1","tool":"search","args":{"q":"green tea","limit":10},"deadline":1765000000000}`
	n := max(b.N, 200)
	var socket string
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("csp") {
			w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'")
		}
		fmt.Fprintf(w, `<!doctype html><html data-socket=%q data-n="%d" data-msg='%s'><body><script>
addEventListener('securitypolicyviolation', (e) => (document.documentElement.dataset.violation = e.blockedURI));
</script></body></html>`, socket, n, msg)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	origin := "http://" + ln.Addr().String()
	socket = "ws://" + ln.Addr().String() + "/ws"

	br := &ExtensionBrowser{ctx: startChromium(b, ChromiumOptions{Extension: repoPath(b, "e2e/socketplace"), NoWebMCP: true})}
	// Each measured tab is brought to the front: a background tab's renderer is run at a lower
	// priority, and the tab a person's call runs in may be either.
	front := func(tab context.Context) {
		if err := chromedp.Do(tab, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, page.BringToFront, cdp.Empty{})
			return err
		})); err != nil {
			b.Fatalf("bring the tab to the front: %v", err)
		}
	}
	var out struct {
		ContentScriptSocketUs, PortUs, WorkerSocketUs, RelayUs, FrameSocketUs, FrameRelayUs, MpUs, MpRelayUs float64
		Error                                                                                                string
	}
	read := func(page string) {
		tab := br.Tab(b, page)
		front(tab)
		var raw string
		br.waitJS(b, tab, 2*time.Minute, `document.documentElement.dataset.out`, &raw)
		if err := json.Unmarshal([]byte(raw), &out); err != nil || out.Error != "" {
			b.Fatalf("%s: %s %v", page, out.Error, err)
		}
		var violation string
		br.eval(b, tab, `document.documentElement.dataset.violation ?? ''`, &violation)
		b.Logf("%s: the page saw a CSP violation: %q", page, violation)
	}
	read(origin + "/?csp")
	b.ResetTimer()
	read(origin + "/")
	tab := br.Tab(b, origin+"/")
	front(tab)
	var pageUs float64
	br.eval(b, tab, `(async () => {
  const html = document.documentElement, n = Number(html.dataset.n), msg = html.dataset.msg;
  const ws = new WebSocket(html.dataset.socket + '?who=page');
  await new Promise((r) => (ws.onopen = r));
  let next;
  ws.onmessage = () => next();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) { const e = new Promise((r) => (next = r)); ws.send(msg); await e; }
  return ((performance.now() - t0) * 1000) / n;
})()`, &pageUs)
	b.StopTimer()
	mu.Lock()
	seen := make([]string, 0, len(origins))
	for o := range origins {
		seen = append(seen, o)
	}
	mu.Unlock()
	b.Logf("the echo saw sockets from: %s", strings.Join(seen, ", "))
	// Round trips timed at the echo: p50 and p99 of each place.
	mu.Lock()
	for _, who := range []string{"worker", "relay", "mprelay", "cs", "page", "frame", "framerelay"} {
		var at []time.Time
		for _, a := range arrivals[who] {
			if len(*a) > len(at) {
				at = *a
			}
		}
		if len(at) < 3 {
			mu.Unlock()
			b.Fatalf("the echo read %d messages from the %s's socket", len(at), who)
		}
		lat := make([]time.Duration, 0, len(at)-2)
		for i := 2; i < len(at); i++ {
			lat = append(lat, at[i].Sub(at[i-1]))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), who+"-p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), who+"-p99-µs")
	}
	mu.Unlock()
	b.ReportMetric(out.WorkerSocketUs, "worker-socket-µs")
	b.ReportMetric(out.PortUs, "port-µs")
	b.ReportMetric(out.WorkerSocketUs+out.PortUs, "worker+port-µs")
	b.ReportMetric(out.RelayUs, "relay-µs")
	b.ReportMetric(out.MpUs, "messageport-µs")
	b.ReportMetric(out.MpRelayUs, "messageport-relay-µs")
	b.ReportMetric(out.FrameSocketUs, "frame-socket-µs")
	b.ReportMetric(out.FrameRelayUs, "frame-relay-µs")
	b.ReportMetric(out.ContentScriptSocketUs, "content-script-socket-µs")
	b.ReportMetric(pageUs, "page-socket-µs")
}
