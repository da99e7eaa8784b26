package bridgetest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
)

// The benchmark runs the server in a child process (this test binary again,
// running TestBenchServerProcess), so the memory it reports is the server's
// alone and not the 5,000 clients'. See docs/BENCHMARKS.md.

const envBenchServer = "TABBRIDGE_BENCH_SERVER" // "tabbridge" or "echo"

// benchBrowsers is how many browsers connect (TABBRIDGE_BENCH_BROWSERS, default 5000).
func benchBrowsers() int {
	if n, err := strconv.Atoi(os.Getenv("TABBRIDGE_BENCH_BROWSERS")); err == nil && n > 0 {
		return n
	}
	return 5000
}

func BenchmarkIdleBrowsers5000(b *testing.B) {
	for _, mode := range []string{"echo", "tabbridge"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runIdleBrowsers(b, mode, benchBrowsers())
			}
		})
	}
}

type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	URL string
}

func startChild(b *testing.B, mode string) *child {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchServerProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), envBenchServer+"="+mode)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	c.URL = c.expect(b, "URL")[0]
	return c
}

func (c *child) expect(b *testing.B, prefix string) []string {
	for c.out.Scan() {
		if f := strings.Fields(c.out.Text()); len(f) > 0 && f[0] == prefix {
			return f[1:]
		}
	}
	b.Fatalf("server process ended before %s: %v", prefix, c.out.Err())
	return nil
}

// mem asks the child for its memory after a GC: Go heap+stacks in use, RSS,
// and the stacks alone.
func (c *child) mem(b *testing.B) (goBytes, rss, stack int64) {
	fmt.Fprintln(c.in, "mem")
	f := c.expect(b, "MEM")
	goBytes, _ = strconv.ParseInt(f[0], 10, 64)
	rss, _ = strconv.ParseInt(f[1], 10, 64)
	stack, _ = strconv.ParseInt(f[2], 10, 64)
	return goBytes, rss, stack
}

func (c *child) stop() {
	fmt.Fprintln(c.in, "quit")
	c.in.Close()
	c.cmd.Wait()
}

func runIdleBrowsers(b *testing.B, mode string, n int) {
	b.StopTimer()
	srv := startChild(b, mode)
	defer srv.stop()
	var ticket func() string
	if mode == "tabbridge" {
		env := &servertest.Env{URL: srv.URL}
		person := env.Person(b, "bench@example.com")
		person.Origin = bridgetest.Origin(servertest.ExtensionID)
		ticket = func() string {
			var out struct{ Ticket string }
			person.MustJSON("POST", "/api/tickets", nil, 201, &out)
			return out.Ticket
		}
		ticket() // warm the path before measuring
	}
	goBefore, rssBefore, stackBefore := srv.mem(b)

	start := time.Now()
	browsers := connectAll(b, srv.URL, n, ticket)
	connectTook := time.Since(start)
	defer func() {
		for _, br := range browsers {
			br.Conn.Close()
		}
	}()
	goAfter, rssAfter, stackAfter := srv.mem(b)

	b.StartTimer()
	rtts := pingRandom(b, browsers, 2000, mode == "echo")
	b.StopTimer()
	// Again once about a third of the browsers have pinged (an idle browser
	// pings every 20 s): what handling a ping keeps counts too.
	goPinged, rssPinged, stackPinged := srv.mem(b)
	b.ReportMetric(float64(goPinged-goBefore)/float64(n), "goB/browser-pinged")
	b.ReportMetric(float64(rssPinged-rssBefore)/float64(n), "rssB/browser-pinged")
	b.Logf("%s after the pings: Go heap+stacks %+.1f KiB/browser (stacks %+.1f), RSS %+.1f KiB/browser", mode,
		float64(goPinged-goBefore)/1024/float64(n), float64(stackPinged-stackBefore)/1024/float64(n), float64(rssPinged-rssBefore)/1024/float64(n))

	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	p50, p99 := rtts[len(rtts)/2], rtts[len(rtts)*99/100]
	b.ReportMetric(float64(goAfter-goBefore)/float64(n), "goB/browser")
	b.ReportMetric(float64(rssAfter-rssBefore)/float64(n), "rssB/browser")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.Logf("%s: %d browsers connected in %v; server Go heap+stacks %+.1f KiB/browser (stacks %+.1f), RSS %+.1f KiB/browser; ping p50 %v p99 %v",
		mode, n, connectTook.Round(time.Millisecond), float64(goAfter-goBefore)/1024/float64(n), float64(stackAfter-stackBefore)/1024/float64(n),
		float64(rssAfter-rssBefore)/1024/float64(n), p50, p99)
}

// connectAll connects n browsers, 32 at a time; ticket is nil for the echo server.
func connectAll(b *testing.B, url string, n int, ticket func() string) []*bridgetest.Browser {
	out := make([]*bridgetest.Browser, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				br, err := connectOne(url, i, ticket)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out[i] = br
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("connect: %v", firstErr)
	}
	return out
}

func connectOne(url string, i int, ticket func() string) (*bridgetest.Browser, error) {
	tk := "none"
	if ticket != nil {
		tk = ticket()
	}
	br, _, err := bridgetest.Dial(context.Background(), url, tk, bridgetest.Origin(servertest.ExtensionID))
	if err != nil {
		return nil, err
	}
	if ticket != nil {
		if _, err := br.Hello(fmt.Sprintf("bench-browser-%05d", i), "Bench", "1.0.0", 30*time.Second); err != nil {
			return nil, err
		}
	}
	return br, nil
}

// pingRandom pings k random browsers one after another and returns the
// round trips. The echo server answers a ping with the ping itself.
func pingRandom(b *testing.B, browsers []*bridgetest.Browser, k int, echo bool) []time.Duration {
	rtts := make([]time.Duration, 0, k)
	for i := 0; i < k; i++ {
		br := browsers[rand.IntN(len(browsers))]
		ping := br.Ping
		if echo {
			ping = func(id string, _ time.Duration) (time.Duration, error) { return echoPing(br, id) }
		}
		rtt, err := ping(fmt.Sprint("p", i), 10*time.Second)
		if err != nil {
			b.Fatalf("ping: %v", err)
		}
		rtts = append(rtts, rtt)
	}
	return rtts
}

func echoPing(br *bridgetest.Browser, id string) (time.Duration, error) {
	start := time.Now()
	if err := br.Send(map[string]string{"type": "ping", "id": id}); err != nil {
		return 0, err
	}
	_, err := br.Next(10 * time.Second)
	return time.Since(start), err
}

// TestBenchServerProcess is the benchmark's server process; it does nothing
// in a normal test run.
func TestBenchServerProcess(t *testing.T) {
	mode := os.Getenv(envBenchServer)
	if mode == "" {
		t.Skip("only run as the benchmark's server process")
	}
	if os.Getenv("TABBRIDGE_BENCH_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 64 // every small allocation counted, not one per 512 KiB
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveMode(t, mode, ln)
	defer stop()
	fmt.Printf("URL http://%s\n", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "mem":
			goBytes, rss, stack := memNow()
			fmt.Printf("MEM %d %d %d %d\n", goBytes, rss, stack, runtime.NumGoroutine())
			writeHeapProfile(t, mode)
		case "quit":
			return
		}
	}
}

func serveMode(t *testing.T, mode string, ln net.Listener) func() {
	if mode == "echo" {
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Get("/ws/extension", websocket.New(echo, websocket.Config{ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &sync.Pool{}}))
		go app.Listener(ln)
		return func() { app.Shutdown() }
	}
	// The collector as `tabbridge serve` ships it, unless GOGC or GOMEMLIMIT
	// is set to compare others (TABBRIDGE_GC_HEADROOM=off: the percentage
	// fixed): what it lets the heap grow to between collections is resident
	// memory too.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(server.DefaultGCPercent)
		if os.Getenv("TABBRIDGE_GC_HEADROOM") != "off" {
			server.TuneGC(server.DefaultGCPercent, server.DefaultGCHeadroom) // for the process's life
		}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(server.DefaultMemoryLimit)
	}
	db, err := store.Open(context.Background(), store.Options{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{
		PublicURL: "http://" + ln.Addr().String(), DB: db, Key: []byte("bench-signing-key-0123456789abcdef"),
		ExtensionIDs: []string{servertest.ExtensionID}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		AuthAttemptsPerMinute: 1 << 20, Bridge: bridge.Options{Idle: 10 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		db.Close()
	}
}

// echo is the baseline: the same Fiber and WebSocket stack, answering each
// frame with itself, and nothing else.
func echo(c *websocket.Conn) {
	for {
		typ, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(typ, msg); err != nil {
			return
		}
	}
}

// writeHeapProfile writes the server's heap profile, each time memory is
// measured, to $TABBRIDGE_BENCH_HEAPPROFILE.<mode> when that is set: where
// the memory per browser goes (go tool pprof -sample_index=inuse_space).
func writeHeapProfile(t *testing.T, mode string) {
	path := os.Getenv("TABBRIDGE_BENCH_HEAPPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path + "." + mode)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// memNow returns Go heap and stack memory in use after a full GC, and the
// process's resident set.
func memNow() (goBytes, rss, stack int64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	goBytes, stack = int64(m.HeapInuse+m.StackInuse), int64(m.StackInuse)
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb * 1024
		}
	}
	return goBytes, rss, stack
}
