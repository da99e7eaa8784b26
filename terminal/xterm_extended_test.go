package terminal

import (
	"strings"
	"testing"
)

// TestSavedExtendedMatchesXterm checks the saved cursor's HAS_EXTENDED
// (xterm.js saves it with the background): a DECRC after the attach
// payload makes the pen's own underline style and hyperlink show, or hide,
// as in xterm.js fed the program's bytes.
func TestSavedExtendedMatchesXterm(t *testing.T) {
	cases := []struct{ stream, then string }{
		// saved while a link and a curly underline were in use
		{"\x1b[4:3m\x1b]8;;http://x/\x07\x1b7\x1b[24m\x1b]8;;\x07a", "\x1b]8;;http://y/\x07\x1b[4:0m\x1b8b\x1b[0mc"},
		// saved with none: a DECRC hides them
		{"\x1b7\x1b]8;;http://x/\x07a", "\x1b]8;;http://y/\x07\x1b[4:2m\x1b8b"},
		// on the alternate screen, and kept for it after leaving
		{"\x1b[?1049h\x1b]8;id=3;http://z/\x07\x1b7\x1b]8;;\x07alt\x1b[?1049l", "\x1b[?1049h\x1b]8;;http://w/\x07\x1b8d"},
		{"\x1b[?47h\x1b]8;;http://z/\x07\x1b7\x1b]8;;\x07\x1b[?47lmain", "\x1b[?47h\x1b]8;;http://w/\x07\x1b8d"},
	}
	var xc []xtermCase
	for _, c := range cases {
		xc = append(xc, xtermCase{Cols: 20, Rows: 6, Streams: [][]byte{
			[]byte(c.stream + c.then), append(attachPayload(t, 20, 6, []byte(c.stream)), c.then...),
		}})
	}
	for i, d := range runXterm(t, xc) {
		if diff := diffStates(d[0].Before, d[1].Before); len(diff) > 0 {
			t.Errorf("case %d: after %q the attached terminal differs:\n%s", i, cases[i].then, strings.Join(diff, "\n"))
		}
	}
}
