package relay_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// hugeLinks prints 40 hyperlinks whose targets are 1 MiB each, one per
// line, as `cat` of a hostile file does: 40 MiB of targets, more than the
// server reads from a daemon in one message (wire.MaxFromDaemon). Then it
// runs then, and waits.
func hugeLinks(then string) string {
	return `u=$(head -c 1048576 /dev/zero | tr '\0' a); i=0; while [ $i -lt 40 ]; do printf '\033]8;;https://e.example/%s%d\033\\x\033]8;;\033\\\r\n' "$u" $i; i=$((i+1)); done; ` + then + `; exec sleep 600`
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
		if err := v.Wait(wait, func() bool {
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
	scrolled := start(hugeLinks(`printf '\033[H\033[2JSCROLLED READ''Y\r\n'`))
	r.waitDaemon(scrolled, "SCROLLED READY")
	noLinkDrop(r)
	shows(scrolled, "SCROLLED READY")

	// 23 of the links stay on the screen: 23 MiB of redraw.
	onScreen := start(hugeLinks(`printf 'ON SCREEN'`))
	r.waitDaemon(onScreen, "ON SCREEN")
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
