//go:build !windows

package terminal

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// collector gathers a session's batches and lets a test wait for text.
type collector struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	next    int64 // offset the next batch must have
	bad     string
	changed chan struct{} // signalled after each batch
}

func newCollector() *collector { return &collector{changed: make(chan struct{}, 1)} }

func (c *collector) add(b Batch) {
	c.mu.Lock()
	if b.Offset != c.next && c.bad == "" {
		c.bad = fmt.Sprintf("batch at %d, want %d", b.Offset, c.next)
	}
	c.next += int64(len(b.Data))
	c.buf.Write(b.Data)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *collector) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// waitFor waits until the output matches re, and returns the match.
func (c *collector) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if m := re.FindStringSubmatch(string(c.bytes())); m != nil {
			return m
		}
		select {
		case <-c.changed:
		case <-ctx.Done():
			t.Fatalf("output never matched %s: %q", re, c.bytes())
		}
	}
}

func start(t *testing.T, c *collector, cols, rows int, path string, args ...string) *Session {
	t.Helper()
	s, err := Start(Options{Path: path, Args: args, Cols: cols, Rows: rows, Output: c.add, Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

func waitDone(t *testing.T, s *Session) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("session never finished")
	}
}

// TestEveryByteBeforeExit runs a program that writes 4 MiB and exits at
// once: the tail (where a common peer loses up to 19 KB) must reach the
// emulator and the subscriber before the exit status is reported.
func TestEveryByteBeforeExit(t *testing.T) {
	raw := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	var text bytes.Buffer
	enc := base64.StdEncoding.EncodeToString(raw) // 4 MiB
	for len(enc) > 0 {
		n := min(76, len(enc))
		text.WriteString(enc[:n] + "\n")
		enc = enc[n:]
	}
	path := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(path, text.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCollector()
	s := start(t, c, 80, 24, "cat", path)
	waitDone(t, s)
	if code := s.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	want := bytes.ReplaceAll(text.Bytes(), []byte("\n"), []byte("\r\n")) // the tty's onlcr
	got := c.bytes()
	if !bytes.Equal(got, want) {
		t.Fatalf("subscriber got %d bytes, want %d", len(got), len(want))
	}
	if c.bad != "" {
		t.Fatal(c.bad)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.End() != int64(len(want)) {
		t.Fatalf("emulator fed %d bytes, want %d", snap.End(), len(want))
	}
	lines := strings.Split(strings.TrimSpace(text.String()), "\n")
	redraw := snap.Redraw
	for _, b := range snap.Tail {
		redraw = append(redraw, b.Data...)
	}
	screen := feed(80, 24, string(redraw))
	defer screen.close()
	if got, want := lineText(screen.buf.row(22)), lines[len(lines)-1]; got != want {
		t.Fatalf("last screen line %q, want %q", got, want)
	}
}

func TestStopKillsProcessGroup(t *testing.T) {
	c := newCollector()
	s := start(t, c, 80, 24, "sh", "-c", `sleep 300 & echo "grandchild $!"; wait`)
	m := c.waitFor(t, regexp.MustCompile(`grandchild (\d+)`))
	pid, _ := strconv.Atoi(m[1])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if code := s.ExitCode(); code != -1 {
		t.Errorf("exit code %d, want -1 (killed)", code)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for alive(pid) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("grandchild %d survived Stop", pid)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestInputResizeAndRedraw(t *testing.T) {
	c := newCollector()
	s := start(t, c, 60, 10, "sh", "-c",
		`printf '\033]0;✳ demo\007\033[?2004h\033[?1h\033[1;31mred\033[0m\r\n'; read x; stty size; printf '\033[?1049h\033[5;5Hin alt'; read y`)
	c.waitFor(t, regexp.MustCompile(`red`))
	if err := s.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	if err := s.Input([]byte("go\r")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, regexp.MustCompile(`in alt`))
	if !bytes.Contains(c.bytes(), []byte("30 100")) {
		t.Errorf("stty size did not see the resize: %q", c.bytes())
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := feed(100, 30, string(c.bytes()[:snap.Offset]))
	defer want.close()
	if want.title != "✳ demo" || !want.altActive() {
		t.Fatalf("replayed stream: title %q alt %v", want.title, want.altActive())
	}
	got := feed(100, 30, string(snap.Attach()))
	defer got.close()
	if d := observe(want).diff(observe(got)); len(d) > 0 {
		t.Fatalf("snapshot differs from the stream:\n%s", strings.Join(d, "\n"))
	}
}

// TestInputNeverBlocks: a program that never reads its input gets far more
// than the input queue holds; Input refuses the excess at once instead of
// blocking its caller (the daemon's only reader of the server's frames).
func TestInputNeverBlocks(t *testing.T) {
	s, err := Start(Options{Path: "sleep", Args: []string{"60"}, InputQueue: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	// Whole lines: the line discipline discards a line too long for its
	// buffer but holds complete ones until the program reads them.
	chunk := bytes.Repeat([]byte("pasted line\r"), 4<<10/12)
	result := make(chan error, 1)
	go func() {
		for range 16 * (64 << 10) / len(chunk) {
			if err := s.Input(chunk); err != nil {
				result <- err
				return
			}
		}
		result <- nil
	}()
	select {
	case err := <-result:
		if !errors.Is(err, ErrInputFull) {
			t.Fatalf("input sixteen times the queue to a program that does not read it: %v, want ErrInputFull", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Input blocked on a program that does not read its input")
	}
}

// TestExitReleasesThePTY: once a program exits by itself, its input writer
// and PTY are released without Stop; its last screen stays readable.
func TestExitReleasesThePTY(t *testing.T) {
	base := openFDs(t)
	c := newCollector()
	var sessions []*Session
	for range 10 {
		s := start(t, c, 80, 24, "sh", "-c", "echo bye")
		waitDone(t, s)
		sessions = append(sessions, s)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(20 * time.Second)
	for openFDs(t) > base {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("%d fds open after 10 sessions exited, %d before", openFDs(t), base)
		}
	}
	for _, s := range sessions {
		if err := s.Input([]byte("x")); !errors.Is(err, ErrClosed) {
			t.Fatalf("input to an exited program: %v, want ErrClosed", err)
		}
		if err := s.Resize(100, 30); err != nil {
			t.Fatalf("resizing an exited session's screen: %v", err)
		}
		snap, err := s.Snapshot()
		if err != nil || !bytes.Contains(snap.Redraw, []byte("bye")) {
			t.Fatalf("last screen of an exited session: %q, %v", snap.Redraw, err)
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestSessionAnswersQueries: the session, as the terminal of record,
// answers a cursor position report and device attributes with nobody
// watching, once each. The program prints every byte it reads in hex; a
// marker key typed after the replies were read ends the count.
func TestSessionAnswersQueries(t *testing.T) {
	c := newCollector()
	s := start(t, c, 80, 24, "sh", "-c", `stty raw -echo; printf '\033[3;5H\033[6n\033[c'; `+
		`while :; do dd bs=1 count=1 2>/dev/null | od -An -tx1; done`)
	// The cursor report ends in R (52), device attributes in c (63).
	c.waitFor(t, regexp.MustCompile(`(?s) 52\n.* 63\n| 63\n.* 52\n`))
	if err := s.Input([]byte("z")); err != nil {
		t.Fatal(err)
	}
	m := c.waitFor(t, regexp.MustCompile(`(?s)\x1b\[c(.*) 7a\n`))
	var read []byte
	for _, h := range strings.Fields(m[1]) {
		b, err := strconv.ParseUint(h, 16, 8)
		if err != nil {
			t.Fatalf("program printed %q", m[1])
		}
		read = append(read, byte(b))
	}
	if n := strings.Count(string(read), "\x1b[3;5R"); n != 1 {
		t.Fatalf("the program read %d cursor reports: %q", n, read)
	}
	if n := strings.Count(string(read), "\x1b[?"); n != 1 {
		t.Fatalf("the program read %d device attribute replies: %q", n, read)
	}
}
