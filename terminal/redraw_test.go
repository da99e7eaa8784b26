package terminal

import (
	"fmt"
	"strings"
	"testing"
)

// dirtyStream leaves a target terminal in as many wrong states as the
// package tracks: alternate screen, modes, origin mode, scroll region, pen,
// open link, title, hidden bar cursor, text everywhere.
const dirtyStream = "\x1b]2;dirty\x07garbage\r\nmore garbage\x1b[?2004h\x1b[?1h\x1b[?1000h\x1b=" +
	"\x1b[?1049h\x1b[41;1mALT JUNK\x1b]8;;http://dirty\x07link\x1b[3;5r\x1b[?6h\x1b[5 q\x1b[?25l" +
	"\x1b(0qqq\x1b7\x1b[2;2H"

// observed is what a redraw promises to reproduce, read from the screen
// model: every cell of both screens (text, width, pen), cursors, modes,
// region, title and character sets.
type observed struct {
	cols, rows  int
	alt         bool
	active      []string
	main        []string
	x, y        int
	saved       string
	pen         pen
	link        linkRef
	hidden      bool
	modes       modes
	title, icon string
	top, bottom int
	charsets    [4]byte
	gl          int
	cs          byte
}

// rowString renders row y of b as comparable text: one entry per cell.
func rowString(t *term, b *buffer, y int) string {
	var s strings.Builder
	l := b.row(y)
	for x, c := range l.cells[:min(len(l.cells), t.cols)] { // an alternate line may be longer than the screen
		// What no sequence can make is compared as the redraw makes it
		// (docs/DECISIONS.md): a wide character without its second half
		// as a blank of its style, a second half without its first (but
		// one ICH made) as a default blank, a second half in its first
		// half's style, a mark alone in a cell on a space.
		switch {
		case c.width == 2 && cutWide(l, x, t.cols):
			c = cell{width: 1, style: c.style}
		case c.width == 0 && c.r == 0 && !c.comb && (x == 0 || l.cells[x-1].width != 2) && !t.canSplit(l, x):
			c = cell{width: 1}
		case c.width == 0 && c.r == 0 && !c.comb && (x == 0 || l.cells[x-1].width != 2):
			// made as ICH makes it (splitHalf)
		case c.width == 0 && c.r == 0 && !c.comb:
			c.style = l.cells[x-1].style
		}
		p := t.styles.pens[c.style]
		p.link = 0
		text := l.text(x)
		if c.r == 0 && !c.comb {
			text = ""
		}
		if text == "" && c.width == 1 {
			text = " " // erased and written blanks look alike (xterm_test.go's blankAsSpace)
		}
		if loneMark(c, text) {
			text = " " + text // as writeCellText writes it
		}
		if text == " " && c.style == 0 {
			s.WriteString("_")
			continue
		}
		fmt.Fprintf(&s, "[%q %d %+v %s]", text, c.width, p, t.links[t.styles.pens[c.style].link].url)
	}
	return s.String()
}

// restoredX is a saved cursor's column as DECRC restores it, in xterm.js
// and the emulator: within the line, so a column saved at or past its end
// (a pending wrap, a zero-width character there, a resize to fewer columns)
// restores to the last.
func restoredX(x, cols int) int { return min(x, cols-1) }

func observe(t *term) observed {
	o := observed{
		cols: t.cols, rows: t.rows, alt: t.altActive(), x: t.buf.x, y: t.buf.y,
		pen: cellPen(t.pen), link: t.links[cellPen(t.pen).link], hidden: t.hidden, modes: t.modes,
		title: t.title, icon: t.icon, top: t.buf.top, bottom: t.buf.bottom,
		charsets: t.charsets, gl: t.gl, cs: t.cs,
	}
	o.pen = normalPen(o.pen) // what it writes: extended attributes a DECRC left unused are not in a payload
	o.pen.link = 0
	b := t.buf
	o.saved = fmt.Sprintf("%d,%d %+v %q", restoredX(b.savedX, t.cols), max(min(b.savedY-b.ybase(), t.rows-1), 0), b.savedPen, b.savedCS)
	if b == t.normal && t.savedAbove() {
		// on a history line, which only an attach payload's history reaches
		o.saved = fmt.Sprintf("%d, line %d of history %+v %q", restoredX(b.savedX, t.cols), b.savedY, b.savedPen, b.savedCS)
	}
	for y := range t.rows {
		o.active = append(o.active, rowString(t, t.buf, y))
		if o.alt {
			o.main = append(o.main, rowString(t, t.normal, y))
		}
	}
	if o.alt {
		n := t.normal
		// A saved row that scrolled off the top reads back as row 0, one a
		// resize left below the screen as the last row (DECRC clamps both),
		// and a redraw can only save rows on the screen.
		saved := fmt.Sprintf("%d,%d", restoredX(n.savedX, t.cols), max(min(n.savedY-n.ybase(), t.rows-1), 0))
		if t.savedAbove() {
			saved = fmt.Sprintf("%d, line %d of history", restoredX(n.savedX, t.cols), n.savedY)
		}
		o.main = append(o.main, fmt.Sprintf("cursor %d,%d saved %s %+v", n.x, n.y, saved, n.savedPen))
	}
	return o
}

// diff describes the first differences between two observations.
func (o observed) diff(p observed) []string {
	var d []string
	add := func(format string, args ...any) {
		if len(d) < 8 {
			d = append(d, fmt.Sprintf(format, args...))
		}
	}
	if o.cols != p.cols || o.rows != p.rows || o.alt != p.alt {
		add("size/alt %dx%d %v, want %dx%d %v", p.cols, p.rows, p.alt, o.cols, o.rows, o.alt)
		return d
	}
	diffLines(add, "active", o.active, p.active)
	diffLines(add, "main", o.main, p.main)
	if o.x != p.x || o.y != p.y || o.pen != p.pen || o.link != p.link || o.hidden != p.hidden {
		add("cursor %d,%d %+v %v hidden %v, want %d,%d %+v %v hidden %v", p.x, p.y, p.pen, p.link, p.hidden, o.x, o.y, o.pen, o.link, o.hidden)
	}
	if o.saved != p.saved {
		add("saved cursor %s, want %s", p.saved, o.saved)
	}
	if o.modes != p.modes {
		add("modes %+v, want %+v", p.modes, o.modes)
	}
	if o.title != p.title || o.icon != p.icon {
		add("title %q/%q, want %q/%q", p.title, p.icon, o.title, o.icon)
	}
	if o.top != p.top || o.bottom != p.bottom {
		add("scroll region %d-%d, want %d-%d", p.top, p.bottom, o.top, o.bottom)
	}
	if o.charsets != p.charsets || o.gl != p.gl || o.cs != p.cs {
		add("charsets %q GL %d in use %q, want %q GL %d in use %q", p.charsets, p.gl, p.cs, o.charsets, o.gl, o.cs)
	}
	return d
}

func diffLines(add func(string, ...any), name string, want, got []string) {
	if len(want) != len(got) {
		add("%s: %d lines, want %d", name, len(got), len(want))
		return
	}
	for y := range want {
		if want[y] != got[y] {
			add("%s row %d:\n  got  %s\n  want %s", name, y, got[y], want[y])
		}
	}
}

// checkRedraw writes src's redraw into a fresh and a dirty terminal of the
// same size and compares both with src.
func checkRedraw(t testing.TB, src *term) {
	t.Helper()
	want := observe(src)
	redraw := src.redraw()
	attach := Snapshot{Rows: src.rows, History: src.history(), Redraw: redraw}.Attach()
	for _, dirty := range []string{"", dirtyStream} {
		dst := newTerm(src.cols, src.rows)
		want := want
		if dirty == "" {
			dst.write(attach) // a fresh viewer's payload: a saved cursor above the screen is in its history
		} else {
			dst.write([]byte(dirty))
			dst.write(redraw)
		}
		got := observe(dst)
		if dirty != "" && src.savedAbove() {
			// a dirty terminal's history is its own: the saved line is not there
			want.saved, got.saved = "", ""
			if len(want.main) > 0 && len(got.main) > 0 {
				want.main, got.main = want.main[:len(want.main)-1], got.main[:len(got.main)-1]
			}
		}
		dst.close()
		if d := want.diff(got); len(d) > 0 {
			t.Fatalf("redraw into dirty=%v differs:\n%s\nredraw: %q", dirty != "", strings.Join(d, "\n"), redraw)
		}
	}
}

func feed(cols, rows int, stream string) *term {
	t := newTerm(cols, rows)
	t.write([]byte(stream))
	return t
}

func spinnerStream() string {
	var b strings.Builder
	b.WriteString("$ build\r\n")
	frames := []string{"⠋", "⠙", "⠹", "⠸"}
	for i := range 500 {
		fmt.Fprintf(&b, "\r\x1b[2K\x1b[36m%s\x1b[0m compiling step %d/500", frames[i%4], i)
	}
	return b.String()
}

func altScreenStream() string {
	var b strings.Builder
	b.WriteString("\x1b[32mmain line 1\x1b[0m\r\nmain line 2\r\n$ ")
	b.WriteString("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J")
	b.WriteString("\x1b[44;97m┌────── editor ──────┐\x1b[0m\r\n")
	for i := range 5 {
		fmt.Fprintf(&b, "│ line %d \x1b[1;31mred\x1b[0m \x1b[3mitalic\x1b[0m │\r\n", i)
	}
	b.WriteString("\x1b[7;3H\x1b[4mcursor here\x1b[0m\x1b[5;10H\x1b[2 q")
	return b.String()
}

func colourStream() string {
	var b strings.Builder
	for i := 30; i < 38; i++ {
		fmt.Fprintf(&b, "\x1b[%dm%d\x1b[%dm%d", i, i, i+60, i+60)
	}
	b.WriteString("\x1b[0m\r\n")
	for i := 0; i < 256; i += 17 {
		fmt.Fprintf(&b, "\x1b[38;5;%d;48;5;%dmx", i, 255-i)
	}
	b.WriteString("\x1b[0m\r\n")
	for i := 0; i < 256; i += 40 {
		fmt.Fprintf(&b, "\x1b[38;2;%d;%d;%dm█\x1b[48;2;1;2;%dm ", i, 255-i, i/2, i)
	}
	b.WriteString("\x1b[0m\r\n\x1b[1;2;3;4;5;7;9mattrs\x1b[0m \x1b[4:3;58;5;196mcurly\x1b[0m\r\n")
	b.WriteString("漢字かな 😀 👍🏽 e\u0301 \x1b]8;id=7;https://example.com/a\x07link\x1b]8;;\x07 done\r\n")
	b.WriteString("\x1b[35;48;5;22m\x1b]8;;https://open.example\x07open pen")
	return b.String()
}

func modesStream() string {
	return "\x1b[?2004h\x1b[?1h\x1b=\x1b[?1002h\x1b[?1006h\x1b[?1004h\x1b[?7l\x1b[20h$ prompt \x1b[6 q"
}

func scrollRegionStream() string {
	var b strings.Builder
	b.WriteString("header\r\n\x1b[3;8r\x1b[3H")
	for i := range 20 {
		fmt.Fprintf(&b, "scrolled %d\r\n", i)
	}
	b.WriteString("\x1b[?6h\x1b[2;4H\x1b7\x1b[1;1Hx")
	return b.String()
}

func TestRedrawReproducesScreen(t *testing.T) {
	cases := map[string]string{
		"spinner":      spinnerStream(),
		"alt screen":   altScreenStream(),
		"alt via 1047": "main\x1b[2;3H\x1b7\x1b[4;5H\x1b[?1047hALT\x1b[3;3H\x1b7\x1b[1;1H",
		"colours":      colourStream(),
		"modes":        modesStream(),
		"scroll":       scrollRegionStream(),
		"title":        "\x1b]0;✳ Claude Code; working\x07hi",
		"empty":        "",
		"dirty twice":  dirtyStream + dirtyStream,
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			src := feed(40, 12, stream)
			defer src.close()
			checkRedraw(t, src)
		})
	}
}

// TestObservedDiffSeesDifferences guards the checker itself: the screen's
// text alone (no cursor, modes or title) must not pass for a redraw.
func TestObservedDiffSeesDifferences(t *testing.T) {
	for name, stream := range map[string]string{
		"alt": altScreenStream(), "modes": modesStream(), "scroll": scrollRegionStream(), "colours": colourStream(),
	} {
		src := feed(40, 12, stream)
		var text strings.Builder
		for y := range src.rows {
			l := src.buf.row(y)
			for x := range l.cells {
				text.WriteString(l.text(x))
			}
			text.WriteString("\r\n")
		}
		dst := feed(40, 12, text.String())
		if len(observe(src).diff(observe(dst))) == 0 {
			t.Errorf("%s: plain text reproduced everything; the checker is blind", name)
		}
		src.close()
		dst.close()
	}
}
