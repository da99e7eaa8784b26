//go:build !windows

package relay_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// hugeLinks prints 40 hyperlinks whose targets are mib MiB each, one per
// line, as `cat` of a hostile file does: at 1 MiB, 40 MiB of targets, more
// than the server reads from a daemon in one message (wire.MaxFromDaemon),
// and at 2 MiB, more than that on the screen alone. Then it
// runs then, says so on the named pipe done, and waits.
func hugeLinks(mib int, then, done string) string {
	return `u=$(head -c ` + strconv.Itoa(mib<<20) + ` /dev/zero | tr '\0' a); i=0; while [ $i -lt 40 ]; do printf '\033]8;;https://e.example/%s%d\033\\x\033]8;;\033\\\r\n' "$u" $i; i=$((i+1)); done; ` + then + `; echo > '` + done + `'; exec sleep 600`
}

// written waits until a program has written everything, as it says on the
// named pipe done (the daemon's screen is no event to wait on, and every
// look at it is a snapshot of 40 MiB).
func written(t *testing.T, done string) {
	t.Helper()
	read := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(done) // blocks until the program opens the pipe, then reads to its close
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testutil.WaitHuge):
		t.Fatal("the program never finished writing")
	}
}

// TestHugeLinksKeepTheMachineOnline: a program can make its snapshot as
// large as it likes (every cell of the screen and the scrollback can hold
// a link of 10 million characters). A snapshot over the server's read
// limit closed the machine's link, every session of it going offline, and
// the link's next snapshot was as large, so the machine never came back.
// Now the daemon sends such a snapshot without its history (links only in
// the scrollback: the screen is shown whole), and a screen still too large
// as a notice; the machine stays online throughout.
func TestHugeLinksKeepTheMachineOnline(t *testing.T) {
	r := newRig(t, nil)
	start := func(script string) string {
		t.Helper()
		id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", script}, Cols: 80, Rows: 24,
			Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LC_ALL=C"}})
		if err != nil {
			t.Fatal(err)
		}
		r.awaitListed(id)
		return id
	}
	shows := func(id, text string) {
		t.Helper()
		v := r.viewer(id, true, false)
		if err := v.Wait(testutil.WaitHuge, func() bool {
			noLinkDrop(r)
			s, err := v.Screen()
			return err == nil && bytes.Contains(s.Redraw, []byte(text))
		}); err != nil {
			noLinkDrop(r)
			s, _ := v.Screen()
			t.Fatalf("a viewer never showed %q (%v); it shows %q", text, err, s.Redraw)
		}
	}

	// The links scroll away and the screen is cleared: the history alone
	// is too large, and the screen is shown.
	dir := t.TempDir()
	done := func(name string) string {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	scrolledDone := done("scrolled")
	scrolled := start(hugeLinks(1, `printf '\033[H\033[2JSCROLLED READ''Y\r\n'`, scrolledDone))
	written(t, scrolledDone)
	noLinkDrop(r)
	shows(scrolled, "SCROLLED READY")

	// 23 of the links stay on the screen: 46 MiB of redraw.
	onScreenDone := done("onscreen")
	onScreen := start(hugeLinks(2, `printf 'ON SCREEN'`, onScreenDone))
	written(t, onScreenDone)
	noLinkDrop(r)
	shows(onScreen, "this screen is not shown")
	if s, ok := r.d.Session(onScreen); ok {
		snap, err := s.Snapshot()
		if err != nil || len(snap.Redraw) <= wire.MaxSnapshot {
			t.Fatalf("the screen's redraw is %d bytes (%v): the test does not test an oversize screen", len(snap.Redraw), err)
		}
	}

	// The machine's other sessions went on meanwhile.
	shows(scrolled, "SCROLLED READY")
	noLinkDrop(r)
}
