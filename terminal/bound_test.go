package terminal

import (
	"bytes"
	"strings"
	"testing"
)

// screenOf is the screen a fresh 80×24 terminal shows after p.
func screenOf(t *testing.T, p ...[]byte) string {
	t.Helper()
	v := NewEmulator(80, 24)
	defer v.Close()
	for _, b := range p {
		if _, err := v.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	s, err := v.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return string(s.Redraw)
}

// TestBoundLeavesOutHistoryThenScreen: a snapshot over the bound loses its
// history first, and a redraw still over it becomes OversizeNotice, which
// leaves a viewer inside the OSC the emulator is reading, so the rest of
// that string is swallowed on both and what follows is shown alike,
// whether the string read so far fits beside the notice or not.
func TestBoundLeavesOutHistoryThenScreen(t *testing.T) {
	link := func(n int) string {
		return "\x1b]8;;https://e.example/" + strings.Repeat("a", 1000) + string(rune('0'+n%10)) + "\x1b\\x\x1b]8;;\x1b\\\r\n"
	}
	var links strings.Builder
	for i := range 60 {
		links.WriteString(link(i))
	}
	rest := "bbbb\x1b\\AFTER"

	for _, tc := range []struct {
		name       string
		stream     string // fed before the snapshot
		max        int
		left       string
		notice     bool
		wantRedraw string // the redraw ends with this
	}{
		{"fits", "hello\r\n", 1 << 20, "", false, ""},
		{"history only", links.String() + "\x1b[H\x1b[2Jclear screen\r\n\x1b]2;" + strings.Repeat("c", 100), 20000, "history", false, "\x1b]2;" + strings.Repeat("c", 100)},
		{"screen, string resumed", links.String() + "\x1b]2;" + strings.Repeat("c", 100), 10000, "screen", true, "\x1b]2;" + strings.Repeat("c", 100)},
		{"screen, string aborted", links.String() + "\x1b]2;" + strings.Repeat("c", 20000), 10000, "screen", true, "\x1b]x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEmulator(80, 24)
			defer e.Close()
			if _, err := e.Write([]byte(tc.stream)); err != nil {
				t.Fatal(err)
			}
			s, err := e.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			before := len(s.History) + len(s.Redraw)
			if got := s.Bound(tc.max); got != tc.left {
				t.Fatalf("Bound left out %q, want %q (history %d + redraw %d bytes)", got, tc.left, len(s.History), len(s.Redraw))
			}
			if tc.left != "" && len(s.History)+len(s.Redraw) > tc.max {
				t.Fatalf("bounded to %d bytes from %d, over %d", len(s.History)+len(s.Redraw), before, tc.max)
			}
			if tc.left != "" && len(s.History) != 0 {
				t.Fatal("the history was kept")
			}
			if got := bytes.HasPrefix(s.Redraw, []byte(OversizeNotice)); got != tc.notice {
				t.Fatalf("the redraw starts with the notice: %v, want %v", got, tc.notice)
			}
			if !bytes.HasSuffix(s.Redraw, []byte(tc.wantRedraw)) {
				t.Fatalf("the redraw ends %q, want %q", s.Redraw[max(0, len(s.Redraw)-40):], tc.wantRedraw)
			}
			// The rest of the string, then text: the viewer reads them as
			// the emulator does (the rest ends the string, the text is shown).
			if _, err := e.Write([]byte(rest)); err != nil {
				t.Fatal(err)
			}
			model, err := e.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			viewer := screenOf(t, s.Redraw, []byte(rest))
			if !tc.notice {
				if want := screenOf(t, model.Redraw); viewer != want {
					t.Fatalf("after the bounded snapshot the viewer shows\n%q\nthe emulator\n%q", viewer, want)
				}
				return
			}
			if !strings.Contains(viewer, "this screen is not shown") || !strings.Contains(viewer, "\x1b[2KAFTER") {
				t.Fatalf("the viewer does not show the notice and the text after it: %q", viewer)
			}
			title := "\x1b]2;" + strings.Repeat("c", 100) + "bbbb\a" // the string read on, to its end
			if tc.wantRedraw == "\x1b]x" {
				title = "\x1b]2;\a" // an aborted string: its rest swallowed, nothing set
			}
			if !strings.Contains(viewer, title) {
				t.Fatalf("the viewer's title is not %q: %q", title, viewer)
			}
		})
	}
}
