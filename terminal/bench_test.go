package terminal

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/creack/pty"
)

// catOutput is cat-style output: 1 MiB of 120-column text lines with CRLF.
func catOutput() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "%06d %s\r\n", i, bytes.Repeat([]byte("lorem ipsum "), 10)[:113])
	}
	return b.Bytes()
}

// BenchmarkEmulatorFeed measures the screen model on scrolling output:
// cat-style text at 200×50, coloured 120-column lines (a build log) at
// 120×40, and the recorded corpus of real programs (testdata/xterm) at
// 120×30. Besides wall-clock MB/s it reports MB per second of the
// process's CPU time, which the other work on a shared machine disturbs
// far less.
func BenchmarkEmulatorFeed(b *testing.B) {
	var coloured bytes.Buffer
	for i := 0; coloured.Len() < 1<<20; i++ {
		fmt.Fprintf(&coloured, "\x1b[3%dm%08d\x1b[0m %s\r\n", i%8, i, bytes.Repeat([]byte("lorem ipsum "), 10)[:110])
	}
	var corpus []byte
	files, _ := filepath.Glob(filepath.Join("testdata", "xterm", "*.bin"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		corpus = append(corpus, data...)
	}
	for _, c := range []struct {
		name       string
		cols, rows int
		data       []byte
	}{{"cat", 200, 50, catOutput()}, {"coloured", 120, 40, coloured.Bytes()}, {"corpus", 120, 30, corpus}} {
		b.Run(c.name, func(b *testing.B) {
			t := newTerm(c.cols, c.rows)
			defer t.close()
			b.SetBytes(int64(len(c.data)))
			cpu0 := testutil.CPUTime()
			b.ResetTimer()
			for range b.N {
				for p := c.data; len(p) > 0; p = p[min(32<<10, len(p)):] {
					t.write(p[:min(32<<10, len(p))])
				}
			}
			b.StopTimer()
			if d := testutil.CPUTime() - cpu0; d > 0 {
				b.ReportMetric(float64(len(c.data))*float64(b.N)/1e6/d.Seconds(), "cpu-MB/s")
			}
		})
	}
}

func BenchmarkCutter(b *testing.B) {
	data := catOutput()
	c := NewCutter()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		for p := data; len(p) > 0; p = p[min(32<<10, len(p)):] {
			c.Scan(p[:min(32<<10, len(p))])
		}
	}
}

// BenchmarkBarePTY is the baseline: cat through a PTY, read and dropped.
func BenchmarkBarePTY(b *testing.B) {
	path := filepath.Join(b.TempDir(), "out")
	data := bytes.ReplaceAll(catOutput(), []byte("\r\n"), []byte("\n"))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	buf := make([]byte, 32<<10)
	b.ResetTimer()
	for range b.N {
		ptmx, err := pty.StartWithSize(exec.Command("cat", path), &pty.Winsize{Cols: 200, Rows: 50})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := ptmx.Read(buf); err != nil {
				break
			}
		}
		_ = ptmx.Close()
	}
}

// BenchmarkSession is the whole path: cat in a PTY, coalesced, emulated.
func BenchmarkSession(b *testing.B) {
	path := filepath.Join(b.TempDir(), "out")
	data := bytes.ReplaceAll(catOutput(), []byte("\r\n"), []byte("\n"))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for range b.N {
		s, err := Start(Options{Path: "cat", Args: []string{path}, Cols: 200, Rows: 50})
		if err != nil {
			b.Fatal(err)
		}
		<-s.Done()
		if err := s.Stop(b.Context()); err != nil && !errors.Is(err, ErrClosed) {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryFullHistory is the memory a session holds once its
// history is full: 50 sessions each print 1,100 coloured lines at 120
// columns (more than HistoryLines) and stay alive; it reports the growth of
// the process's resident set (VmRSS, after GC and returning freed memory to
// the OS) and of the Go heap, per session.
func BenchmarkMemoryFullHistory(b *testing.B) {
	path := filepath.Join(b.TempDir(), "lines")
	var text bytes.Buffer
	for i := range 1100 {
		fmt.Fprintf(&text, "\x1b[3%dm%06d\x1b[0m %s\n", i%8, i, bytes.Repeat([]byte("lorem ipsum "), 10)[:113])
	}
	if err := os.WriteFile(path, text.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	const n = 50
	rss0, heap0 := memNow()
	var sessions []*Session
	for range n {
		got := make(chan struct{})
		var seen atomic.Int64
		s, err := Start(Options{Path: "sh", Args: []string{"-c", "cat " + path + "; printf DONE; exec cat"}, Cols: 120, Rows: 40,
			Output: func(bt Batch) {
				if bytes.Contains(bt.Data, []byte("DONE")) && seen.Add(1) == 1 {
					close(got)
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, s)
		<-got
	}
	for _, s := range sessions { // the emulator has taken every byte
		if _, err := s.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
	rss1, heap1 := memNow()
	b.ReportMetric(float64(rss1-rss0)/n/1e6, "RSS-MB/session")
	b.ReportMetric(float64(heap1-heap0)/n/1e6, "heap-MB/session")
	for _, s := range sessions {
		_ = s.Stop(b.Context())
	}
	for range b.N {
	}
}

// memNow returns VmRSS and the Go heap in use, after a GC that returns
// freed memory to the OS.
func memNow() (rss, heap int64) {
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			rss = kb << 10
		}
	}
	return rss, int64(m.HeapInuse)
}
