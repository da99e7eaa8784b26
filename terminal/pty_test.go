package terminal

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run on every platform (on Linux in CI; the Windows build
// under Wine where it can, see docs/DECISIONS.md): a session echoing, its
// exit code, a resize the program sees, and a stop that ends the program's
// whole process tree.

const ptyWait = 30 * time.Second

// ptyOutput gathers a session's output and lets a test wait for text.
type ptyOutput struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func (o *ptyOutput) add(b Batch) {
	o.mu.Lock()
	o.buf.Write(b.Data)
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *ptyOutput) waitFor(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(ptyWait)
	for !strings.Contains(o.String(), text) {
		select {
		case <-o.changed:
		case <-timeout:
			t.Fatalf("the output never held %q: %q", text, o.String())
		}
	}
}

// shell starts script in the platform's shell: cmd.exe /c on Windows, sh -c
// elsewhere.
func shell(t *testing.T, cols, rows int, script string) (*Session, *ptyOutput) {
	t.Helper()
	path, args := "sh", []string{"-c", script}
	if runtime.GOOS == "windows" {
		path, args = "cmd.exe", []string{"/c", script}
	}
	full, err := exec.LookPath(path)
	if err != nil {
		t.Fatal(err)
	}
	out := &ptyOutput{changed: make(chan struct{}, 1)}
	s, err := Start(Options{Path: full, Args: args, Cols: cols, Rows: rows, Output: out.add, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ptyWait)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return s, out
}

func waitExit(t *testing.T, s *Session) int {
	t.Helper()
	select {
	case <-s.Done():
		return s.ExitCode()
	case <-time.After(ptyWait):
		t.Fatal("the program never exited")
		return 0
	}
}

// TestPTYEchoAndExitCode: output arrives, then the program's own code.
func TestPTYEchoAndExitCode(t *testing.T) {
	s, out := shell(t, 80, 24, "echo tabbridge-hello && exit 3")
	if code := waitExit(t, s); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	out.waitFor(t, "tabbridge-hello")
}

// TestPTYResize: the program sees the size it was started with, then the
// new one.
func TestPTYResize(t *testing.T) {
	script, before, after := "stty size; read x; stty size", "24 80", "30 100"
	if runtime.GOOS == "windows" {
		// mode con prints the console's lines and columns.
		script, before, after = "mode con & set /p x= & mode con", "80", "100"
	}
	s, out := shell(t, 80, 24, script)
	out.waitFor(t, before)
	if err := s.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	if err := s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	waitExit(t, s)
	out.waitFor(t, after)
}

// TestPTYStopEndsTheTree: Stop ends a program whose child holds the
// terminal, and returns.
func TestPTYStopEndsTheTree(t *testing.T) {
	script := "sleep 1000 & echo started; wait"
	if runtime.GOOS == "windows" {
		script = "echo started & ping -n 1000 127.0.0.1"
	}
	s, out := shell(t, 80, 24, script)
	out.waitFor(t, "started")
	ctx, cancel := context.WithTimeout(context.Background(), ptyWait)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Stop returned before the program was reaped")
	}
}
