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
		// an underline saved without it, which only a DECRC and an SGR 59 make
		{"\x1b[4m\x1b7\x1b[m\x1b8\x1b[59m\x1b7a", "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8b\x1b[0mc"},
		{"\x1b[4m\x1b7\x1b[m\x1b8\x1b]8;;\x07\x1b[3;5H\x1b7\x1b[31m", "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8b"},
		// on the alternate screen, kept after leaving it
		{"\x1b[?1049h\x1b[4m\x1b7\x1b[m\x1b8\x1b[59m\x1b7\x1b[?1049l", "\x1b[?1049h\x1b]8;;http://y/\x07\x1b[4:3m\x1b8d"},
		// and each of those at a pending wrap, which the redraw's DECRC leaves
		{"\x1b[4m\x1b7\x1b[m\x1b8\x1b[59m\x1b[31mabcdefghijklmnopqrs\x1b[0;44m\x1b8\x1b[59m\x1b[1;20Ht\x1b7", "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8b"},
		{"\x1b(0\x1b[4m\x1b7\x1b[m\x1b8\x1b[59mqqqqqqqqqqqqqqqqqqq日\x1b[2;1H" + strings.Repeat("q", 20) + "\x1b7\x1b(B", "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8q"},
		{"\x1b[?1049h\x1b[4m\x1b7\x1b[m\x1b8\x1b[59m" + strings.Repeat("x", 20) + "\x1b7\x1b[?1049l", "\x1b[?1049h\x1b]8;;http://y/\x07\x1b[4:3m\x1b8d"},
		// in the history: on a line of its own, and on one joined to the line before
		{"\x1b[4m\x1b7\x1b[m\x1b8\x1b[59mabcdefghijklmnopqrst\x1b7\x1b[0m" + strings.Repeat("\r\n", 8), "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8b"},
		{"\x1b[4m\x1b7\x1b[m\x1b8\x1b[59m" + strings.Repeat("w", 40) + "\x1b7\x1b[0m" + strings.Repeat("\r\n", 8), "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8b"},
		{"\x1b[4m\x1b7\x1b[m\x1b8\x1b[59m" + strings.Repeat("w", 25) + "\x1b7\x1b[0m" + strings.Repeat("\r\n", 8), "\x1b]8;;http://y/\x07\x1b[4:3m\x1b8b"},
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

// TestHiddenExtendedPenMatchesXterm checks the pen a DECRC (or SCORC, or
// leaving the alternate screen by mode 1049) left with extended attributes
// it switched off: a viewer that attached must hold them unused as the one
// fed the program's bytes does, so that a later SGR 0 (the link), 4 or 59
// brings them back in both.
func TestHiddenExtendedPenMatchesXterm(t *testing.T) {
	cases := []struct{ stream, then string }{
		// a link, a curly underline and its colour hidden by DECRC
		{"\x1b7\x1b[4:3;58;5;196m\x1b]8;;http://x/\x07\x1b8", "a\x1b[0mb\x1b[4mc"},
		// the pen changed after the DECRC by SGRs that keep them hidden
		{"\x1b[31;1m\x1b7\x1b]8;;http://x/\x07\x1b[4:2;58;2;1;2;3m\x1b8\x1b[22;3;44m", "a\x1b[4mb\x1b[59mc"},
		// the cursor at a pending wrap, written with the pen, or another
		{"\x1b7\x1b]8;;http://x/\x07\x1b8abcdefghijklmnopqrst", "\x1b[0mz"},
		{"\x1b7\x1b]8;;http://x/\x07\x1b8\x1b[1;31;44mabcdefghijklmnopqrs\x1b[22;7;39mt\x1b[27;3m", "\x1b[0mz"},
		// SCORC, and the saved cursor elsewhere, protected
		{"\x1b[1\"q\x1b[3;4H\x1b[s\x1b[0\"q\x1b[4:3m\x1b[2;2H\x1b[u\x1b[5;5H", "a\x1b[59mb\x1b8c"},
		// mode 1049's DECRC on leaving the alternate screen
		{"\x1b[?1049h\x1b]8;;http://x/\x07\x1b[?1049l", "a\x1b[0mb"},
		// hidden on the normal screen, then the alternate one shown
		{"\x1b7\x1b]8;;http://x/\x07\x1b8\x1b[?1049h", "a\x1b[0mb"},
		// the active screen's saved pen has them in use: the alternate
		// screen's saved cursor hides them
		{"\x1b[?47h\x1b7\x1b[?47l\x1b]8;;http://y/\x07\x1b7\x1b[?47h\x1b]8;;http://x/\x07\x1b8\x1b[?47l", "a\x1b[0mb\x1b8c"},
		// a DEC graphics set in use
		{"\x1b(0\x1b7\x1b]8;;http://x/\x07\x1b8", "q\x1b[0mq"},
		// and the cursor at a pending wrap in it
		{"\x1b(0\x1b7\x1b]8;;http://x/\x07\x1b8qqqqqqqqqqqqqqqqqqqa", "\x1b[0mq"},
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

// TestWrappedLinkIsOneLink checks hyperlinks without an id that wrap
// across rows: xterm.js opens one link per OSC 8, holding every cell
// printed while it is open, and a viewer that attached must hold one too
// (the dumps number links by the cells that share them), also across
// lines a newline ended and for what the program prints after (the pen's
// link). With one link per row, widening the terminal after attaching
// joined the rows and dropped the link of the cells that came up from the
// row below.
func TestWrappedLinkIsOneLink(t *testing.T) {
	long := "\x1b]8;;http://x/\x07" + strings.Repeat("abcdefghij", 5) + "\x1b]8;;\x07 after\r\n"
	streams := []string{
		long,
		"\x1b[31m" + long + "\x1b]8;;http://x/\x07same uri, another link\x1b]8;;\x07\r\n",
		// two links, one after the other without a close
		"\x1b]8;;http://x/\x07" + strings.Repeat("a", 25) + "\x1b]8;;http://x/\x07" + strings.Repeat("b", 25) + "\x1b]8;;\x07",
		// a wide character that does not fit wraps with the link
		"\x1b]8;;http://x/\x07" + strings.Repeat("a", 19) + "日本語\x1b]8;;\x07",
		// in the history, then the screen
		long + long + strings.Repeat("line\r\n", 8) + long,
		// left open: what the program prints next is the same link
		"\x1b[1m\x1b]8;;http://x/\x07" + strings.Repeat("a", 25),
		"\x1b]8;;http://x/\x07one\r\n\x1b[31mtwo\x1b[3;5H",
		// ... and the cursor at a pending wrap after a cell without it
		"\x1b]8;;http://x/\x07" + strings.Repeat("x", 40) + "\x1b[2K",
		"\x1b[44m\x1b]8;;http://x/\x07" + strings.Repeat("x", 30) + "\x1b]8;;\x07\x1b[1mxxxxxxxxxx\x1b]8;;http://y/\x07",
		// an id: one link wherever it is printed
		"\x1b]8;id=7;http://x/\x07one\x1b]8;;\x07 \x1b]8;id=7;http://x/\x07two\x1b]8;;\x07",
	}
	var xc []xtermCase
	for _, s := range streams {
		pay := attachPayload(t, 20, 6, []byte(s))
		xc = append(xc, xtermCase{Cols: 20, Rows: 6, Links: true, Streams: [][]byte{[]byte(s), pay},
			Stepped: [][]xtermStep{
				{{Data: []byte(s)}, {Cols: 60, Rows: 6}},
				{{Data: pay}, {Cols: 60, Rows: 6}},
			}})
	}
	for i, d := range runXterm(t, xc) {
		if diff := diffStates(d[0].Before, d[1].Before); len(diff) > 0 {
			t.Errorf("stream %d: the attached terminal differs:\n%s", i, strings.Join(diff, "\n"))
		}
		if diff := diffStates(d[0].After, d[1].After); len(diff) > 0 {
			t.Errorf("stream %d: the attached terminal differs after the probe:\n%s", i, strings.Join(diff, "\n"))
		}
		if diff := diffStates(d[2].Before, d[3].Before); len(diff) > 0 {
			t.Errorf("stream %d: the attached terminal widened differs:\n%s", i, strings.Join(diff, "\n"))
		}
	}
}
