package relay_test

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/fasthttp/websocket"
	fws "github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// chunk is one synthetic output batch: printable lines, ground state at its end.
var chunk = bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnop\r\n"), 448) // 32 KiB

// fakeDaemon dials the daemon socket and announces one session, so a
// benchmark can feed the server hop faster than any emulator.
func fakeDaemon(b *testing.B, env *servertest.Env, token string) *websocket.Conn {
	conn, _, err := websocket.DefaultDialer.Dial(strings.Replace(env.URL, "http", "ws", 1)+"/ws/daemon",
		http.Header{"Authorization": {"Bearer " + token}, wire.InstallHeader: {"relay-bench-install"}})
	if err != nil {
		b.Fatal(err)
	}
	info := wire.SessionInfo{ID: "bench-session", Command: []string{"bench"}, Cols: 80, Rows: 24}
	_ = conn.WriteMessage(websocket.TextMessage, wire.Control{Type: wire.TypeSession, Index: 1, Session: &info}.Encode())
	_ = conn.WriteMessage(websocket.BinaryMessage, wire.AppendDaemonSnapshot(nil, wire.Snapshot{Session: 1, Cols: 80, Rows: 24, Redraw: []byte("\x1b[H")}))
	go func() { // drain redraw requests
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	return conn
}

// BenchmarkRelayThroughput measures output through the server hop: a
// synthetic daemon sends 32 KiB batches, one viewer reads them and
// acknowledges each frame as the browser would. The viewer queue is raised
// so the hop is measured, not resyncs: run it with -benchtime ≤ 8000x.
func BenchmarkRelayThroughput(b *testing.B) {
	env := servertest.Start(b, storetest.SQLite, func(o *serverOptions) { o.Relay.ViewerQueue = 256 << 20 })
	person := env.Person(b, "bench@example.com")
	var m struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": "bench"}, 201, &m)
	d := fakeDaemon(b, env, m.Token)
	defer d.Close()
	var tk struct{ URL string }
	for {
		if st, _ := person.Do("POST", "/api/sessions/bench-session/viewer-ticket", map[string]bool{"watchOnly": true}); st == 201 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	person.MustJSON("POST", "/api/sessions/bench-session/viewer-ticket", map[string]bool{"watchOnly": true}, 201, &tk)
	v, _, err := websocket.DefaultDialer.Dial(strings.Replace(env.URL, "http", "ws", 1)+tk.URL, http.Header{"Origin": {env.Opts.PublicURL}})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	total := int64(b.N) * int64(len(chunk))
	got := make(chan int64)
	go func() {
		var n, acked int64
		for {
			typ, p, err := v.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				continue
			}
			f, _ := wire.DecodeViewer(p)
			if f.Output != nil {
				n += int64(len(f.Output.Data))
				acked += int64(len(f.Output.Data))
			} else if f.Snapshot != nil {
				acked += int64(len(f.Snapshot.Redraw))
			}
			_ = v.WriteMessage(websocket.TextMessage, wire.Control{Type: wire.TypeAck, Bytes: acked}.Encode())
			if n >= total {
				got <- n
				return
			}
		}
	}()
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	frame := make([]byte, 0, len(chunk)+16)
	for i := range b.N {
		frame = wire.AppendDaemonOutput(frame[:0], wire.Output{Session: 1, Offset: int64(i) * int64(len(chunk)), Data: chunk})
		if err := d.WriteMessage(websocket.BinaryMessage, frame); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-got:
	case <-time.After(60 * time.Second):
		b.Fatal("viewer did not receive everything (it was resynchronised: raise ViewerQueue)")
	}
}

// BenchmarkBareWebSocket is the baseline: the same frames through a Fiber
// WebSocket handler that only echoes them, in the same process.
func BenchmarkBareWebSocket(b *testing.B) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/echo", fws.New(func(c *fws.Conn) {
		for {
			typ, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(typ, p); err != nil {
				return
			}
		}
	}))
	ln := listen(b)
	go app.Listener(ln)
	defer app.Shutdown()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/echo", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}()
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	for range b.N {
		if err := c.WriteMessage(websocket.BinaryMessage, chunk); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// BenchmarkKeystrokeEcho is one keystroke from a viewer to a program in a
// PTY (stty raw; cat) and its echo back to the viewer, through the daemon
// and the relay.
func BenchmarkKeystrokeEcho(b *testing.B) {
	r := newBenchRig(b)
	id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "stty raw -echo; cat"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		b.Fatal(err)
	}
	r.waitListed(id)
	v := r.rawViewer(id)
	defer v.Close()
	latency(b, func(p []byte) error { return v.WriteMessage(websocket.BinaryMessage, wire.AppendViewerInput(nil, p)) },
		func() ([]byte, error) {
			for {
				typ, p, err := v.ReadMessage()
				if err != nil {
					return nil, err
				}
				if typ == websocket.BinaryMessage {
					if f, _ := wire.DecodeViewer(p); f.Output != nil {
						return f.Output.Data, nil
					}
				}
			}
		})
}

// BenchmarkKeystrokeBarePTY is the baseline: the same program in a bare PTY.
func BenchmarkKeystrokeBarePTY(b *testing.B) {
	ptmx, err := pty.Start(exec.Command("sh", "-c", "stty raw -echo; printf R; cat"))
	if err != nil {
		b.Fatal(err)
	}
	defer ptmx.Close()
	buf := make([]byte, 64)
	ptmx.Read(buf) // "R": raw mode is on
	latency(b, func(p []byte) error { _, err := ptmx.Write(p); return err },
		func() ([]byte, error) { n, err := ptmx.Read(buf); return buf[:n], err })
}

// latency sends one key at a time and waits for its echo, reporting p50/p99.
// Keys are typed 30 ms apart, a fast typist's pace: the coalescer sends the
// first bytes after a quiet window at once, but holds output that follows
// other output within one window (25 ms) until the window ends.
func latency(b *testing.B, send func([]byte) error, recv func() ([]byte, error)) {
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		time.Sleep(30 * time.Millisecond) // typing pace, outside the measurement
		b.StartTimer()
		key := []byte{'a' + byte(i%26)}
		start := time.Now()
		if err := send(key); err != nil {
			b.Fatal(err)
		}
		for {
			p, err := recv()
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(p, key) {
				break
			}
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	sortDurations(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkMemoryPerSession is the daemon's heap per idle session (a shell
// prompt at 120×40), and BenchmarkMemoryPerViewer the server's per attached
// viewer; each reports bytes per item.
func BenchmarkMemoryPerSession(b *testing.B) {
	r := newBenchRig(b)
	const n = 20
	before := heap()
	for range n {
		if _, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "printf 'ready\\n'; exec cat"}, Cols: 120, Rows: 40,
			Env: []string{"PATH=" + os.Getenv("PATH")}}); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // let every session print and settle before measuring
	b.ReportMetric(float64(heap()-before)/n, "B/session")
	for range b.N {
	}
}

func BenchmarkMemoryPerViewer(b *testing.B) {
	r := newBenchRig(b)
	id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "printf 'ready\\n'; exec cat"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		b.Fatal(err)
	}
	r.waitListed(id)
	const n = 50
	var vs []*websocket.Conn
	before := heap()
	for range n {
		vs = append(vs, r.rawViewer(id))
	}
	time.Sleep(200 * time.Millisecond) // let every viewer get its snapshot
	b.ReportMetric(float64(heap()-before)/n, "B/viewer")
	for _, v := range vs {
		v.Close()
	}
	for range b.N {
	}
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
