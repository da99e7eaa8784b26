package relay_test

import (
	"bytes"
	"fmt"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// catSize is the output of BenchmarkCat: a build log's worth of colored
// text, large enough that no queue on the way holds it.
const catSize = 64 << 20

// catFile writes catSize bytes of 120-column lines with SGR colors.
func catFile(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "log")
	var buf bytes.Buffer
	for i := 0; buf.Len() < catSize; i++ {
		fmt.Fprintf(&buf, "\x1b[3%dm%08d\x1b[0m %s\n", i%8, i, bytes.Repeat([]byte("lorem ipsum "), 10)[:110])
	}
	if err := os.WriteFile(path, buf.Bytes()[:catSize], 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkCat runs `cat` of 64 MiB in a bare PTY and, in the same run,
// through the daemon and the relay with one viewer attached that reads and
// acknowledges everything as a browser does. It reports the program's rate
// (how long cat took to write it all: what a person waiting for a build
// feels) and, for the relay, the viewer's rate to the exit message and what
// it received: output bytes and redraws.
func BenchmarkCat(b *testing.B) {
	path := catFile(b)
	b.Run("bare", func(b *testing.B) {
		b.SetBytes(catSize)
		for range b.N {
			catBare(b, path)
		}
	})
	b.Run("relay", func(b *testing.B) {
		b.SetBytes(catSize)
		for range b.N {
			catRelay(b, path)
		}
	})
	if gotty := os.Getenv("TABBRIDGE_GOTTY"); gotty != "" {
		b.Run("gotty", func(b *testing.B) {
			b.SetBytes(catSize)
			for range b.N {
				catGotty(b, gotty, path)
			}
		})
	}
}

// catGotty is the same cat through gotty (TABBRIDGE_GOTTY: the path of a
// gotty v1.6.0 binary, built outside this repository), read by a client of
// its webtty protocol until gotty closes the socket as cat exits.
func catGotty(b *testing.B, gotty, path string) {
	b.StopTimer()
	ln := listen(b)
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(gotty, "--address", "127.0.0.1", "--port", strconv.Itoa(port), "cat", path)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	origin := fmt.Sprintf("http://127.0.0.1:%d", port)
	dialer := websocket.Dialer{Subprotocols: []string{"webtty"}}
	var conn *websocket.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // gotty has no readiness signal
		c, _, err := dialer.Dial("ws://127.0.0.1:"+strconv.Itoa(port)+"/ws", http.Header{"Origin": {origin}})
		if err == nil {
			conn = c
			break
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
	}
	defer conn.Close()
	b.StartTimer()
	start := time.Now()
	_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"Arguments":"","AuthToken":""}`))
	_ = conn.WriteMessage(websocket.TextMessage, []byte(`3{"columns":120,"rows":40}`))
	var got int64
	var buf bytes.Buffer
	for {
		_, p, err := readReusing(conn, &buf)
		if err != nil {
			break
		}
		if len(p) > 0 && p[0] == '1' {
			got += int64(len(p)-1) * 3 / 4
		}
	}
	b.StopTimer()
	b.ReportMetric(catSize/time.Since(start).Seconds()/1e6, "viewer-MB/s")
	b.ReportMetric(float64(got)/1e6, "viewer-output-MB")
	b.StartTimer()
}

// readReusing reads a message into buf, as a browser's socket does without
// a fresh allocation grown from 512 bytes for each (ReadMessage): the
// viewers of gotty and of the relay both read this way, so the harness
// spends little of the process's CPU and the same on either.
func readReusing(c *websocket.Conn, buf *bytes.Buffer) (int, []byte, error) {
	typ, r, err := c.NextReader()
	if err != nil {
		return 0, nil, err
	}
	buf.Reset()
	_, err = buf.ReadFrom(r)
	return typ, buf.Bytes(), err
}

func catBare(b *testing.B, path string) {
	ptmx, err := pty.StartWithSize(exec.Command("cat", path), &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ptmx.Close() }()
	cpu0 := testutil.CPUTime()
	buf := make([]byte, 32<<10)
	for {
		if _, err := ptmx.Read(buf); err != nil {
			break
		}
	}
	b.ReportMetric(float64((testutil.CPUTime()-cpu0).Nanoseconds())/catSize, "cpu-ns/B") // the reader's process, not cat's

}

func catRelay(b *testing.B, path string) {
	b.StopTimer()
	r := newBenchRig(b)
	id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "stty -echo; printf R; head -c1 >/dev/null; exec cat " + path},
		Cols: 120, Rows: 40, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		b.Fatal(err)
	}
	r.waitListed(id)
	sess, _ := r.d.Session(id)
	v := r.rawViewer(id)
	defer v.Close()
	var got, acked int64
	redraws, frames := 0, 0
	ready := false
	b.StartTimer()
	var start time.Time
	var cpu0 time.Duration
	programDone := make(chan time.Duration, 1)
	var buf bytes.Buffer
	for {
		typ, p, err := readReusing(v, &buf)
		if err != nil {
			b.Fatal(err)
		}
		if typ == websocket.TextMessage {
			if c, err := wire.DecodeFromDaemon(p); err == nil && c.Type == wire.TypeExit {
				break
			}
			continue
		}
		f, _ := wire.DecodeViewer(p)
		switch {
		case f.Output != nil:
			frames++
			got += int64(len(f.Output.Data))
			acked += int64(len(f.Output.Data))
			ready = ready || bytes.Contains(f.Output.Data, []byte("R"))
		case f.Snapshot != nil:
			redraws++
			acked += int64(len(f.Snapshot.Redraw))
			ready = ready || bytes.Contains(f.Snapshot.Redraw, []byte("R"))
		}
		_ = v.WriteMessage(websocket.TextMessage, wire.Control{Type: wire.TypeAck, Bytes: acked}.Encode())
		if ready && start.IsZero() {
			start, cpu0 = time.Now(), testutil.CPUTime()
			go func(start time.Time) { <-sess.Done(); programDone <- time.Since(start) }(start)
			_ = v.WriteMessage(websocket.BinaryMessage, wire.AppendViewerInput(nil, []byte("\r")))
		}
	}
	b.StopTimer()
	viewer, cpu := time.Since(start), testutil.CPUTime()-cpu0
	b.ReportMetric(catSize/(<-programDone).Seconds()/1e6, "program-MB/s")
	b.ReportMetric(catSize/viewer.Seconds()/1e6, "viewer-MB/s")
	b.ReportMetric(float64(got)/1e6, "viewer-output-MB")
	b.ReportMetric(float64(redraws-1), "redraws")
	b.ReportMetric(float64(got)/float64(max(frames, 1))/1024, "KiB/frame") // output frames to the viewer
	b.ReportMetric(float64(cpu.Nanoseconds())/catSize, "cpu-ns/B")         // daemon, server and viewer: the whole process

	b.StartTimer()
}
