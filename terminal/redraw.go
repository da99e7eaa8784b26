package terminal

import (
	"bytes"
	"fmt"
	"sort"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

// redrawReset puts a terminal in a known state before painting: SGR, scroll
// region, origin mode, character sets, hyperlink, insert mode; autowrap off
// so a full row cannot wrap; both screen modes left for the main screen.
const redrawReset = "\x1b[0m\x1b[r\x1b[?6l\x1b(B\x1b)B\x1b*B\x1b+B\x0f" +
	"\x1b]8;;\x07\x1b[4l\x1b[?7l\x1b[?1049l\x1b[?1047l"

// skipModes are restored by other steps of a redraw, or must not be
// replayed: 25 (cursor visibility, last), 1047/1048/1049 (screens, saved
// cursor) and 2026 (the redraw's own synchronized update).
var skipModes = map[int]bool{25: true, 1047: true, 1048: true, 1049: true, 2026: true}

// redraw returns bytes that make a terminal of the same size, fresh or
// dirty, show exactly this screen: the recipe in DESIGN.md Known pitfalls.
func (t *term) redraw() []byte {
	var b bytes.Buffer
	b.WriteString("\x1b[?2026h")
	b.WriteString(redrawReset)
	alt := t.vt.IsAltScreen()
	if alt && t.main != nil {
		paint(&b, t.main.Lines)
		t.enterAltScreen(&b)
	}
	paint(&b, t.activeLines())
	s := t.scr[t.cur()]
	cur := t.cursor()
	// x/vt does not home the cursor when origin mode is set, so a cursor can
	// sit outside the scroll region under it; CUP cannot put it there, so
	// origin mode is then set after the cursors, by absolute positions.
	origin := t.modes[ansi.ModeOrigin].IsSet()
	late := origin && (outside(s, s.saved.pos.Y) || outside(s, cur.pos.Y))
	t.writeModes(&b, late)
	t.writeCharsets(&b)
	if s.top != 0 || s.bottom != t.vt.Height() {
		fmt.Fprintf(&b, "\x1b[%d;%dr", s.top+1, s.bottom)
	}
	fmt.Fprintf(&b, "\x1b]1;%s\x07\x1b]2;%s\x07", t.icon, t.title)
	top := 0
	if origin && !late {
		top = s.top
	}
	writeCursor(&b, s.saved, top)
	b.WriteString("\x1b7")
	writeCursor(&b, cur, top)
	if late {
		b.WriteString("\x1b[?6h")
	}
	b.WriteString("\x1b[?2026l")
	return b.Bytes()
}

// activeLines copies the rows of the active screen.
func (t *term) activeLines() []uv.Line {
	lines := make([]uv.Line, t.vt.Height())
	for y := range lines {
		lines[y] = t.line(y)
	}
	return lines
}

// paint writes each row: move, erase the line (not the display, which x/vt
// would push into history), then the row rendered from its cells.
func paint(b *bytes.Buffer, lines []uv.Line) {
	b.WriteString("\x1b[0m\x1b]8;;\x07") // the alternate screen inherits the main pen
	for y, l := range lines {
		fmt.Fprintf(b, "\x1b[%dH\x1b[2K", y+1)
		b.WriteString(l.Render())
	}
	b.WriteString("\x1b[0m\x1b]8;;\x07")
}

// enterAltScreen restores the main screen's cursor as it was at the switch
// and enters the alternate screen the way the program did. 1049 saves the
// cursor as it enters, so only 1047 needs the saved cursor set first.
func (t *term) enterAltScreen(b *bytes.Buffer) {
	if t.altVia == 1049 {
		writeCursor(b, t.mainCur, 0)
		b.WriteString("\x1b[?1049h")
		return
	}
	writeCursor(b, t.scr[0].saved, 0)
	b.WriteString("\x1b7")
	writeCursor(b, t.mainCur, 0)
	b.WriteString("\x1b[?1047h")
}

// outside reports whether row y is outside s's scroll region.
func outside(s screenState, y int) bool {
	return y < s.top || y >= s.bottom
}

// writeModes sets every tracked mode, resets before sets, because xterm.js
// turns all mouse tracking off on any mouse mode reset.
func (t *term) writeModes(b *bytes.Buffer, skipOrigin bool) {
	var resets, sets []string
	for m, s := range t.modes {
		if s.IsPermanentlySet() || s.IsPermanentlyReset() || (skipOrigin && m == ansi.ModeOrigin) {
			continue
		}
		seq := modeSeq(m, s.IsSet())
		if seq == "" {
			continue
		}
		if s.IsSet() {
			sets = append(sets, seq)
		} else {
			resets = append(resets, seq)
		}
	}
	sort.Strings(resets)
	sort.Strings(sets)
	for _, s := range append(resets, sets...) {
		b.WriteString(s)
	}
}

// modeSeq is the sequence that sets or resets m, or "" for modes a redraw
// handles elsewhere.
func modeSeq(m ansi.Mode, set bool) string {
	final := 'l'
	if set {
		final = 'h'
	}
	switch m := m.(type) {
	case ansi.DECMode:
		if skipModes[int(m)] {
			return ""
		}
		return fmt.Sprintf("\x1b[?%d%c", int(m), final)
	case ansi.ANSIMode:
		return fmt.Sprintf("\x1b[%d%c", int(m), final)
	}
	return ""
}

// writeCursor sets style, position, pen, link and visibility. Under origin
// mode rows count from the scroll region's top, given as top.
func writeCursor(b *bytes.Buffer, c cursorState, top int) {
	n := int(c.style)*2 + 1
	if c.steady {
		n++
	}
	fmt.Fprintf(b, "\x1b[%d q", n)
	fmt.Fprintf(b, "\x1b[%d;%dH", c.pos.Y-top+1, c.pos.X+1)
	b.WriteString("\x1b[0m") // a pen's SGR only adds: the saved cursor's bold must not stay
	b.WriteString(c.pen.String())
	b.WriteString(ansi.SetHyperlink(c.link.URL, c.link.Params))
	if c.hidden {
		b.WriteString("\x1b[?25l")
	} else {
		b.WriteString("\x1b[?25h")
	}
}

// writeCharsets restores the G0–G3 designations and the set invoked into GL,
// which painting needed at their defaults.
func (t *term) writeCharsets(b *bytes.Buffer) {
	for g, final := range t.charsets {
		b.WriteString(string([]byte{ansi.ESC, "()*+"[g], final}))
	}
	b.WriteString([]string{"\x0f", "\x0e", "\x1bn", "\x1bo"}[t.gl])
}
