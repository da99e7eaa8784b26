package terminal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// BenchmarkEmulatorFeed measures x/vt behind term at 200×50, the design's
// measured bottleneck (scrolling copies the grid).
func BenchmarkEmulatorFeed(b *testing.B) {
	data := catOutput()
	t := newTerm(200, 50)
	defer t.close()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		for p := data; len(p) > 0; p = p[min(32<<10, len(p)):] {
			t.write(p[:min(32<<10, len(p))])
		}
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
