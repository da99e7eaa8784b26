package terminal

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// redrawReset puts a terminal in a known state before painting: SGR, scroll
// region, origin mode, character sets, hyperlink, insert mode; autowrap off
// so a full row cannot wrap; the normal buffer active.
const redrawReset = "\x1b[?1049l\x1b[?1047l\x1b[?47l\x1b[0m\x1b[r\x1b[?6l\x1b(B\x1b)B\x1b*B\x1b+B\x0f" +
	"\x1b]8;;\x07\x1b[4l\x1b[?7l"

// redraw returns bytes that make a terminal of the same size, fresh or
// dirty, show exactly this screen: every cell written at its own column,
// then the state a program can see (modes, region, saved cursor, cursor,
// pen, character sets, title).
func (t *term) redraw() []byte {
	var b bytes.Buffer
	b.Grow(t.cols * t.rows * 2)
	b.WriteString("\x1b[?2026h")
	b.WriteString(redrawReset)
	if t.altActive() {
		t.paintScreen(&b, t.normal)
		t.writeSaved(&b, t.normal)
		t.writeCursor(&b, t.normal, t.normal.x, t.normal.y, false, true)
		b.WriteString("\x1b[0m\x1b(B\x0f\x1b[?47h")
	}
	if !t.altActive() {
		t.writeInactiveAltSaved(&b)
	}
	t.paintScreen(&b, t.buf)
	t.writeTabs(&b)
	t.writeSaved(&b, t.buf)
	t.writeModes(&b)
	buf := t.buf
	if buf.top != 0 || buf.bottom != t.rows-1 {
		b.WriteString("\x1b[" + strconv.Itoa(buf.top+1) + ";" + strconv.Itoa(buf.bottom+1) + "r")
	}
	if t.modes.origin {
		b.WriteString("\x1b[?6h")
	}
	b.WriteString("\x1b]1;" + t.icon + "\x07\x1b]2;" + t.title + "\x07")
	t.writePalette(&b)
	// the charset in use left by a DECRC, which the two cases below make
	// by another DECRC, then place the cursor again
	special := t.cs != t.charsets[t.gl] && (t.cs == buf.savedCS || !t.altActive() && t.cs == t.alt.savedCS)
	links, end := t.links, "\x1b]8;;\x07"
	if (!special || buf.x < t.cols) && t.relinkPen(&b, buf) {
		links, end = nil, "" // the pen's link is open, and stays so
		b.WriteString("\x1b[0m")
	} else {
		t.placeCursor(&b, buf, true)
		b.WriteString("\x1b[0m")
	}
	writeSGR(&b, cellPen(t.pen), links)
	if t.cs != t.charsets[t.gl] && t.cs == buf.savedCS {
		// The program's DECRC left the saved set in use, not the invoked
		// one: do the same, then put the cursor and pen back.
		t.writeCharsets(&b, t.charsets[t.gl])
		// DECRC keeps the hyperlink the pen above opened: end it, or a
		// pending wrap's cell written again would take it
		b.WriteString("\x1b8\x1b[0m" + end)
		t.placeCursor(&b, buf, false)
		b.WriteString("\x1b[0m")
		writeSGR(&b, cellPen(t.pen), links)
	} else if t.cs != t.charsets[t.gl] && !t.altActive() && t.cs == t.alt.savedCS {
		// A DECRC on the alternate screen left its saved set in use after
		// the program left it: DECRC there (its saved cursor is written
		// above), leave, and put the cursor and pen back.
		t.writeCharsets(&b, t.charsets[t.gl])
		b.WriteString("\x1b[?47h\x1b8\x1b[?47l\x1b[0m" + end)
		t.placeCursor(&b, buf, false)
		b.WriteString("\x1b[0m")
		writeSGR(&b, cellPen(t.pen), links)
	} else {
		t.writeCharsets(&b, t.charsets[t.gl])
	}
	if hiddenExtended(t.pen) {
		if y, ok := t.hideFrom(); ok {
			t.writeHiddenPen(&b, y)
		}
	}
	if t.modes.insert {
		b.WriteString("\x1b[4h")
	}
	if t.hidden {
		b.WriteString("\x1b[?25l")
	} else {
		b.WriteString("\x1b[?25h")
	}
	if !t.modes.syncOutput {
		b.WriteString("\x1b[?2026l")
	}
	return t.stream.resume(b.Bytes()) // inside a sequence the output after the snapshot goes on with
}

// placeCursor puts the cursor where buf has it. Origin mode with the
// cursor outside the region (a buffer switch leaves it so) cannot be
// reached by CUP, but the alternate buffer's region is the whole screen and
// leaving it copies its cursor.
func (t *term) placeCursor(b *bytes.Buffer, buf *buffer, ascii bool) {
	if t.modes.origin && !t.altActive() && (buf.y < buf.top || buf.y > buf.bottom) {
		b.WriteString("\x1b[?47h")
		t.writeCursor(b, buf, buf.x, buf.y, false, ascii)
		writePastLine(b, buf.x, t.cols)
		b.WriteString("\x1b[?47l")
		return
	}
	t.writeCursor(b, buf, buf.x, buf.y, t.modes.origin, ascii)
	writePastLine(b, buf.x, t.cols)
}

// paintScreen writes every row of buf's screen.
func (t *term) paintScreen(b *bytes.Buffer, buf *buffer) {
	b.WriteString("\x1b[0m\x1b]8;;\x07")
	t.wlink = 0
	for y := range t.rows {
		writeCUP(b, y, 0)
		b.WriteString("\x1b[2K")
		from := 0
		if y > 0 && buf.row(y).wrapped {
			// soft-wrapped from the row above, as xterm.js reflows it on a
			// resize: made by a wrap (the first row's line above is history,
			// which the redraw cannot reach)
			b.WriteString("\x1b[?7h")
			from = t.joinWrap(b, buf.row(y-1), buf.row(y), y-1)
			b.WriteString("\x1b[?7l")
		}
		t.writeLineFrom(b, buf.row(y), from)
		b.WriteString("\x1b[0m")
	}
	t.linkTo(b, 0)
}

// linkTo makes the viewer's pen hold hyperlink l (0 for none), written
// only when it holds another: the link the redraw left open is wlink. The
// rows and history lines are painted with the link left open from one to
// the next (and across a wrap), so the cells of one link on several rows,
// in the order they are painted, stay one link, as xterm.js holds the
// cells printed while one OSC 8 was open (it opens a link without an id
// anew on every OSC 8).
func (t *term) linkTo(b *bytes.Buffer, l uint16) {
	if t.wlink == l {
		return
	}
	r := t.links[l]
	b.WriteString("\x1b]8;" + r.params + ";" + r.url + "\x07")
	t.wlink = l
}

// penTo is SGR 0 and pen p, its hyperlink by linkTo.
func (t *term) penTo(b *bytes.Buffer, p pen) {
	b.WriteString("\x1b[0m")
	writeSGR(b, p, nil)
	t.linkTo(b, p.link)
}

// joinWrap ends line prev at a pending wrap and prints next's first cell,
// which wraps: next is soft-wrapped, as the program's own output left it
// (xterm.js's reflow joins such lines). It returns the column next goes on
// from. Autowrap must be on; prev is screen row y, or the cursor's row when
// y < 0 (the history, which scrolls).
func (t *term) joinWrap(b *bytes.Buffer, prev, next *line, y int) int {
	move := func(x int) {
		if y < 0 {
			b.WriteString("\x1b[" + strconv.Itoa(x+1) + "G")
		} else {
			writeCUP(b, y, x)
		}
	}
	cols := t.cols
	last, first := prev.cells[cols-1], next.cells[0]
	// relink writes a hyperlinked character that wrapped once more where it
	// landed: xterm.js ties a link to the lines it is printed on, and a
	// character that wraps is counted on the line it left, so the link would
	// die with that line (scrolled off, erased) while the viewer fed the
	// program's bytes keeps it
	relink := func() {
		if t.styles.pens[first.style].link != 0 {
			b.WriteString("\x1b[1G")
			t.writeCellText(b, next, 0)
		}
	}
	if first.width == 2 && !cutWide(next, 0, cols) && last.r == 0 && !last.comb && last.width == 1 {
		// a wide character that did not fit: printed in the last column it
		// wraps and leaves that cell empty in the pen it was printed with,
		// so it is printed with the empty cell's pen (a reflow, or a
		// character written there since, can have left the two different)
		// and written again in its own where it landed
		move(cols - 1)
		t.penTo(b, t.styles.pens[last.style])
		t.writeCellText(b, next, 0)
		if last.style != first.style {
			b.WriteString("\x1b[1G")
			t.penTo(b, t.styles.pens[first.style])
			t.writeCellText(b, next, 0)
		} else {
			relink()
		}
		return t.joined(b, 2)
	}
	x := cols - 1
	if last.width == 0 && last.r == 0 && !last.comb && cols >= 2 && prev.cells[cols-2].width == 2 {
		x-- // the wide character that ends the line
	}
	move(x)
	t.penTo(b, t.styles.pens[prev.cells[x].style])
	t.writeCellText(b, prev, x)
	p := t.styles.pens[first.style]
	t.penTo(b, p)
	switch {
	case first.width == 0 && (first.r != 0 || first.comb):
		// a zero-width character standing alone: at a pending wrap it
		// would join the cell before, so a space wraps and it replaces it
		b.WriteString(" \x1b[1G")
		t.writeCellText(b, next, 0)
		return t.joined(b, 1)
	case first.r == 0 && !first.comb:
		b.WriteByte(' ')
		if first.width == 1 && p == (pen{bg: p.bg}) {
			b.WriteString("\x1b[1G\x1b[X") // erased again, as writeLine erases
		}
		return t.joined(b, 1)
	case first.width == 2 && !cutWide(next, 0, cols):
		t.writeCellText(b, next, 0)
		relink()
		return t.joined(b, 2)
	}
	t.writeCellText(b, next, 0)
	relink()
	return t.joined(b, 1)
}

// joined finishes joinWrap at column from: the wrap scrolled in (or found)
// a line erased with the pen of the cell that wrapped; the rest of it is
// erased with none (EL 0 away from column 0 keeps the wrap).
func (t *term) joined(b *bytes.Buffer, from int) int {
	if from >= t.cols { // the line is full: nothing is left to erase
		b.WriteString("\x1b[0m")
		return from
	}
	b.WriteString("\x1b[" + strconv.Itoa(from+1) + "G\x1b[0m\x1b[K")
	return from
}

// writeLine writes a line's cells from column 0, leaving out trailing
// default blanks; a cell after one that is not one ASCII character wide is
// placed by column (CHA), which also keeps a zero-width character from
// joining the one before it.
func (t *term) writeLine(b *bytes.Buffer, l *line) { t.writeLineFrom(b, l, 0) }

// writeLineFrom is writeLine from column from (joinWrap wrote the cells
// before it), after SGR 0.
func (t *term) writeLineFrom(b *bytes.Buffer, l *line, from int) {
	end := min(len(l.cells), t.cols) // an alternate-screen line keeps cells past a narrower screen
	for end > 0 && l.cells[end-1] == (cell{width: 1}) {
		end--
	}
	cur := pen{link: t.wlink} // the link the row or wrap before left open
	curID := uint16(0)
	reposition := from > 0
	if from > 0 {
		b.WriteString("\x1b[0m")
	}
	known := t.wlink == 0 // whether curID is cur's style
	defer func() { t.wlink = cur.link }()
	for x := from; x < end; x++ {
		c := l.cells[x]
		if c.width == 0 && c.r == 0 && !c.comb {
			// the second half of a wide character, or one without its
			// first: made as ICH makes it where it can be, else left
			// blank; the next cell is placed by column
			if t.splitHalf(b, l, x) {
				cur, curID, known = t.styles.pens[l.cells[x-2].style], l.cells[x-2].style, true
				if l.cells[x-2].width == 0 {
					cur, curID = t.styles.pens[l.cells[x-3].style], l.cells[x-3].style
				}
			}
			reposition = true
			continue
		}
		if c.style != curID || !known {
			p := t.styles.pens[c.style]
			writeSGRDiff(b, cur, p, t.links)
			cur, curID, known = p, c.style, true
		}
		if c.r == 0 && !c.comb && c.width == 1 && cur == (pen{bg: cur.bg}) {
			// erased cells are erased again (ECH takes the background
			// only), not written as spaces: to a reflow a cell with no
			// text is not a space (trimmed lengths)
			n := 1
			for x+n < end && l.cells[x+n] == c {
				n++
			}
			if reposition {
				b.WriteString("\x1b[" + strconv.Itoa(x+1) + "G")
			}
			b.WriteString("\x1b[" + strconv.Itoa(n) + "X")
			x += n - 1
			reposition = true // ECH leaves the cursor where it was
			continue
		}
		if reposition || c.width == 0 {
			// after a character of another width, or before one that
			// must not join the character before it
			b.WriteString("\x1b[" + strconv.Itoa(x+1) + "G")
		}
		t.writeCellText(b, l, x)
		reposition = c.width != 1 || c.r >= 0x80
	}
}

// writeCellText writes the character of cell x.
func (t *term) writeCellText(b *bytes.Buffer, l *line, x int) {
	c := l.cells[x]
	switch {
	case c.width == 2 && cutWide(l, x, t.cols):
		// a wide character a resize cut (and a wider one left without
		// its second half): no sequence writes one, so it is redrawn as
		// a blank of its style
		b.WriteByte(' ')
	case c.r == 0 && !c.comb:
		b.WriteByte(' ')
	default:
		text := l.text(x)
		if loneMark(c, text) {
			b.WriteByte(' ') // no sequence joins a mark to an empty cell: it goes on a space
		}
		b.WriteString(text)
	}
}

// loneMark reports whether a cell one column wide holds only zero-width
// characters: a mark joined to an empty cell, which happens only when a
// resize comes between a character and its mark and moves the character
// away (the join state outlives the resize, in xterm.js and the emulator).
func loneMark(c cell, text string) bool {
	r, _ := utf8.DecodeRuneInString(text)
	return c.width == 1 && text != "" && runeWidth(r) == 0
}

// canSplit reports whether splitHalf can make the half at x: it follows an
// erased cell, which follows no other such half.
func (t *term) canSplit(l *line, x int) bool {
	if x < 2 || l.cells[x-1].width != 1 || l.cells[x-1].r != 0 || l.cells[x-1].comb {
		return false // a second half after its first, or one a resize left
	}
	if e := t.styles.pens[l.cells[x-1].style]; e != (pen{bg: e.bg}) {
		return false // not an erased cell
	}
	if l.cells[x-2].width == 0 && (x-2 == 0 || l.cells[x-3].width != 2) {
		return false // another split half
	}
	return true
}

// splitHalf makes the second half of a wide character without its first
// at x the way ICH makes one, when the cell before it is an erased one (as
// ICH leaves it): a wide character in its style at x-2, ICH at x-1 with
// the erased cell's background (x-2 and x-1 become erased cells, the second
// half moves to x), then the character at x-2 again. Cells from x on are
// not painted yet. It reports whether it did (the pen is then x-2's
// character's); a second half a resize left after a written cell cannot be
// made so and stays blank (docs/DECISIONS.md).
func (t *term) splitHalf(b *bytes.Buffer, l *line, x int) bool {
	if !t.canSplit(l, x) {
		return false
	}
	prev := x - 2
	if l.cells[prev].width == 0 {
		prev-- // the wide character that ends at x-2
	}
	b.WriteString("\x1b[" + strconv.Itoa(x-1) + "G\x1b[0m")
	writeSGR(b, t.styles.pens[l.cells[x].style], t.links)
	b.WriteString("一\x1b[" + strconv.Itoa(x) + "G\x1b[0m")
	writeSGR(b, t.styles.pens[l.cells[x-1].style], nil)
	b.WriteString("\x1b[@\x1b[" + strconv.Itoa(prev+1) + "G\x1b[0m\x1b]8;;\x07")
	p := t.styles.pens[l.cells[prev].style]
	writeSGR(b, p, t.links)
	if c := l.cells[prev]; c.r == 0 && !c.comb && c.width == 1 && p == (pen{bg: p.bg}) {
		b.WriteString("\x1b[X") // an erased cell, as writeLine erases one
	} else {
		t.writeCellText(b, l, prev)
	}
	return true
}

// cutWide reports whether the wide character at x has lost its second
// half: a resize cut it at the margin (it stays there, or stands before an
// empty cell once the screen widens again).
func cutWide(l *line, x, cols int) bool {
	return x+1 >= min(len(l.cells), cols) || l.cells[x+1].width != 0
}

// savedAbove reports whether the normal buffer's saved cursor is on a
// history line: history() saves it there, and the redraw leaves it.
func (t *term) savedAbove() bool {
	n := t.normal
	return n.savedY < n.ybase() && n.savedY >= 0
}

// writeSaved sets buf's saved cursor: position, pen and charset, saved
// with DECSC; the normal buffer's only when it is on the screen (history()
// saves one above it).
func (t *term) writeSaved(b *bytes.Buffer, buf *buffer) {
	if buf == t.normal && t.savedAbove() {
		return
	}
	y := buf.savedY - buf.ybase()
	y = min(max(y, 0), t.rows-1)
	t.writeCursor(b, buf, buf.savedX, y, false, true)
	b.WriteString("\x1b[0m")
	writeSGR(b, buf.savedPen, nil)
	temp := t.writeCharsets(b, buf.savedCS)
	if writeDECSC(b, buf.savedPen, t.reachWrap(b, buf, buf.savedX, y)) {
		t.writeCursor(b, buf, buf.savedX, y, false, true)
		t.writeCharsets(b, buf.savedCS)
	}
	if temp {
		t.writeCharsets(b, t.charsets[t.gl])
	}
}

// writeDECSC saves the cursor, pen p written: a saved pen whose extended
// attributes were in use (xterm.js saves HAS_EXTENDED with the background,
// and a DECRC makes the pen's own extended attributes show again) is saved
// while a hyperlink that no cell holds sets it, ended after.
//
// An underline without HAS_EXTENDED is a pen only a DECRC makes (SGR 4 and
// 21 set both; an SGR 59 or OSC 8 after a DECRC that restored both into a
// pen without an underline style clears the bit alone), and the SGR 4 that
// wrote the underline set the bit: so the redraw makes it the same way —
// save, reset, restore, end the (absent) link, which clears the bit and
// keeps the underline, save again. The DECRC puts a cursor at a pending
// wrap back in the last column: reach, when the cursor is at one, writes
// the last cell again to go back there, with the pen as it is, and
// writeDECSC reports true so that the caller writes the cell as it was.
func writeDECSC(b *bytes.Buffer, p pen, reach func()) (rewrote bool) {
	switch {
	case p.flags&flagExtended != 0:
		b.WriteString("\x1b]8;;tabbridge:saved-pen\x07\x1b7\x1b]8;;\x07")
	case p.flags&flagUnderline != 0:
		b.WriteString("\x1b7\x1b[0m\x1b8\x1b]8;;\x07")
		if reach != nil {
			reach()
		}
		b.WriteString("\x1b7")
		return reach != nil
	default:
		b.WriteString("\x1b7")
	}
	return false
}

// reachWrap returns what writes the last cell of buffer buf's row y again
// with the pen as it is, when x is a pending wrap, for writeDECSC.
func (t *term) reachWrap(b *bytes.Buffer, buf *buffer, x, y int) func() {
	if x < t.cols {
		return nil
	}
	return func() {
		l := buf.row(y)
		last := t.lastCellAt(l)
		writeCUP(b, y, last)
		t.writeCellText(b, l, last)
	}
}

// writeInactiveAltSaved sets the saved cursor of the alternate buffer
// while the normal one is shown (xterm.js keeps it when the program leaves
// the alternate screen, and a DECRC after entering again finds it): enter,
// save, leave — the alternate screen is empty and cleared again on leaving.
func (t *term) writeInactiveAltSaved(b *bytes.Buffer) {
	a := t.alt
	if a.savedX == 0 && a.savedY == 0 && a.savedPen == (pen{}) && a.savedCS == 0 && !hiddenExtended(t.pen) {
		return // a viewer's is this one, unless writeHiddenPen DECRCs it
	}
	b.WriteString("\x1b[?47h")
	writeCUP(b, min(max(a.savedY, 0), t.rows-1), min(a.savedX, t.cols-1))
	b.WriteString("\x1b[0m")
	writeSGR(b, a.savedPen, nil)
	if a.savedX >= t.cols {
		b.WriteByte(' ') // a pending wrap, as writeCursor reaches one
	}
	t.writeCharsets(b, a.savedCS)
	var reach func()
	if a.savedX >= t.cols {
		// the alternate screen is empty, and cleared again on leaving
		reach = func() { writeCUP(b, min(max(a.savedY, 0), t.rows-1), t.cols-1); b.WriteByte(' ') }
	}
	writeDECSC(b, a.savedPen, reach)
	// the rows are written next, in ASCII: the program's sets are
	// designated once they are
	b.WriteString("\x1b(B\x1b)B\x1b*B\x1b+B\x0f\x1b[0m\x1b[?47l")
}

// writeCursor moves to (x, y); x == cols, a pending wrap, is reached by
// writing the last cell again. Under origin mode rows count from the
// region's top.
func (t *term) writeCursor(b *bytes.Buffer, buf *buffer, x, y int, origin, ascii bool) {
	row := y
	if origin {
		row -= buf.top
	}
	if x < t.cols {
		writeCUP(b, row, x)
		return
	}
	l := buf.row(y)
	last := t.cols - 1
	if last > 0 && l.cells[last].width == 0 && l.cells[last].r == 0 && !l.cells[last].comb && l.cells[last-1].width == 2 {
		last--
	}
	writeCUP(b, row, last)
	b.WriteString("\x1b[0m")
	writeSGR(b, t.styles.pens[l.cells[last].style], t.links)
	if ascii {
		b.WriteString("\x1b(B\x0f")
	}
	c := l.cells[last]
	switch {
	case c.width == 2 && cutWide(l, last, t.cols): // as in writeLine
		b.WriteByte(' ')
	case c.comb:
		b.WriteString(l.comb[last])
	case c.r == 0:
		b.WriteByte(' ')
	default:
		b.WriteRune(c.r)
	}
	b.WriteString("\x1b]8;;\x07")
}

// writePastLine moves a cursor at a pending wrap one column past the line's
// end when x is there (x > cols), as a zero-width character that joins
// nothing does (xterm.js moves the cursor without writing it, and so does
// the emulator): a C0 control, so it joins nothing, then a zero-width
// space. One column at most: a second would wrap (or, with autowrap off,
// land in the last column), and no print goes further. (A saved cursor
// needs none of this: DECRC brings its column back within the line.)
func writePastLine(b *bytes.Buffer, x, cols int) {
	if x > cols {
		b.WriteString("\x03\u200b")
	}
}

func writeCUP(b *bytes.Buffer, y, x int) {
	b.WriteString("\x1b[" + strconv.Itoa(y+1) + ";" + strconv.Itoa(x+1) + "H")
}

// writeTabs restores tab stops that differ from every 8 columns from 0.
func (t *term) writeTabs(b *bytes.Buffer) {
	buf := t.buf
	tabs := buf.tabs[:min(len(buf.tabs), t.cols)]
	same := true
	for x := range tabs {
		if tabs[x] != (x%8 == 0) {
			same = false
			break
		}
	}
	if same {
		return
	}
	b.WriteString("\x1b[3g")
	for x, set := range tabs {
		if set {
			writeCUP(b, 0, x)
			b.WriteString("\x1bH")
		}
	}
}

// writeModes sets every mode a program can change, resets before sets
// (xterm.js turns all mouse tracking off on any mouse mode reset).
func (t *term) writeModes(b *bytes.Buffer) {
	m := t.modes
	flag := func(n int, set bool, private bool) {
		b.WriteString("\x1b[")
		if private {
			b.WriteByte('?')
		}
		b.WriteString(strconv.Itoa(n))
		if set {
			b.WriteByte('h')
		} else {
			b.WriteByte('l')
		}
	}
	flag(1, m.appCursor, true)
	flag(66, m.appKeypad, true)
	flag(2004, m.bracketedPaste, true)
	flag(45, m.reverseWrap, true)
	flag(1004, m.sendFocus, true)
	flag(20, m.convertEol, false)
	flag(7, m.wraparound, true)
	flag(12, t.blinkOption, true) // the viewer's cursorBlink option, which earlier output may have changed
	b.WriteString("\x1b[?1000l\x1b[?1006l")
	switch m.mouse {
	case mouseX10:
		flag(9, true, true)
	case mouseVT200:
		flag(1000, true, true)
	case mouseDrag:
		flag(1002, true, true)
	case mouseAny:
		flag(1003, true, true)
	}
	switch m.mouseEnc {
	case encSGR:
		flag(1006, true, true)
	case encSGRPixels:
		flag(1016, true, true)
	}
	// DECSCUSR: 0 unsets both; 1–6 set a shape and blinking; 7 and 8 set
	// only blinking (xterm.js keeps the shape), as a program's out of range
	// parameter does.
	b.WriteString("\x1b[0 q")
	if m.cursorBlink != 0 {
		style := 7
		if m.cursorStyle != 0 {
			style = m.cursorStyle*2 - 1
		}
		if m.cursorBlink == 2 {
			style++
		}
		b.WriteString("\x1b[" + strconv.Itoa(style) + " q")
	}
}

// writeCharsets designates G0–G3 and invokes the level, with cs in the
// invoked level if it is not there: a DECSC then saves cs as the set in
// use. It reports whether it put cs there, for the caller to designate the
// real set again after its DECSC.
func (t *term) writeCharsets(b *bytes.Buffer, cs byte) bool {
	final := func(c byte) byte {
		if c == 0 {
			return 'B'
		}
		return c
	}
	for g, c := range t.charsets {
		if g == t.gl {
			c = cs
		}
		b.WriteString(string([]byte{0x1b, "()*+"[g], final(c)}))
	}
	b.WriteString([]string{"\x0f", "\x0e", "\x1bn", "\x1bo"}[t.gl])
	return cs != t.charsets[t.gl]
}

// writeSGR writes p as SGR after a reset, and its hyperlink.
func writeSGR(b *bytes.Buffer, p pen, links []linkRef) {
	writeSGRDiff(b, pen{}, p, links)
}

// writeSGRDiff writes what turns pen from into to: SGR, DECSCA for the
// protection (SGR 0 ends it in xterm.js) and the hyperlink.
func writeSGRDiff(b *bytes.Buffer, from, to pen, links []linkRef) {
	from.flags &^= flagExtended // the SGRs that set the rest set it
	to.flags &^= flagExtended
	if from == to {
		return
	}
	protect := to.flags & flagProtected
	to.flags &^= flagProtected
	var ps []string
	if from.flags&^(to.flags|flagProtected) != 0 || from.fg != to.fg && to.fg == 0 || from.bg != to.bg && to.bg == 0 ||
		from.ul != to.ul && to.ul == 0 || from.ulColor != to.ulColor && to.ulColor == 0 {
		ps = append(ps, "0")
		from = pen{link: from.link}
	}
	flags := []struct {
		f   uint16
		sgr string
	}{{flagBold, "1"}, {flagDim, "2"}, {flagItalic, "3"}, {flagBlink, "5"}, {flagInverse, "7"},
		{flagInvisible, "8"}, {flagStrike, "9"}, {flagOverline, "53"}}
	for _, f := range flags {
		if to.flags&f.f != 0 && from.flags&f.f == 0 {
			ps = append(ps, f.sgr)
		}
	}
	if to.flags&flagUnderline != 0 && (from.flags&flagUnderline == 0 || from.ul != to.ul) {
		ps = append(ps, "4:"+strconv.Itoa(int(max(to.ul, 1))))
	}
	if to.fg != from.fg {
		ps = append(ps, colorSGR(38, to.fg))
	}
	if to.bg != from.bg {
		ps = append(ps, colorSGR(48, to.bg))
	}
	if to.ulColor != from.ulColor && to.ulColor != 0 {
		ps = append(ps, colorSGR(58, to.ulColor))
	}
	if len(ps) > 0 {
		b.WriteString("\x1b[")
		for i, p := range ps {
			if i > 0 {
				b.WriteByte(';')
			}
			b.WriteString(p)
		}
		b.WriteByte('m')
	}
	if links != nil && from.link != to.link {
		l := links[to.link]
		b.WriteString("\x1b]8;" + l.params + ";" + l.url + "\x07")
	}
	if from.flags&flagProtected != protect {
		if protect != 0 {
			b.WriteString("\x1b[1\"q")
		} else {
			b.WriteString("\x1b[0\"q")
		}
	}
}

// colorSGR is the SGR for colour c in the same mode xterm.js keeps it.
func colorSGR(base int, c color) string {
	v := c.value()
	switch c.mode() {
	case colorP16:
		if base == 58 {
			return "58;5;" + strconv.Itoa(v)
		}
		if v < 8 {
			return strconv.Itoa(base - 8 + v)
		}
		return strconv.Itoa(base + 52 + v - 8)
	case colorP256:
		return strconv.Itoa(base) + ";5;" + strconv.Itoa(v)
	case colorRGB:
		return strconv.Itoa(base) + ";2;" + strconv.Itoa(v>>16&0xff) + ";" + strconv.Itoa(v>>8&0xff) + ";" + strconv.Itoa(v&0xff)
	}
	return strconv.Itoa(base + 1)
}

// history renders the normal buffer's history, oldest first, each line
// ended by CRLF or joined to the next by a wrap (joinWrap), the last by
// CRLF.
func (t *term) history() []byte {
	var b bytes.Buffer
	n := t.normal
	lines := t.historyLines()
	from := 0
	t.wlink = 0
	for i, l := range lines {
		if i == n.savedY && t.savedAbove() && from == 0 {
			t.linkTo(&b, 0) // DECSC saves the pen's link as in use
			// the saved cursor scrolled off the top: save it on its own
			// line as the history passes it (DECRC clamps it to row 0,
			// but ED 3 or a taller screen brings the line back)
			b.WriteString("\x1b[" + strconv.Itoa(min(n.savedX, t.cols-1)+1) + "G\x1b[0m")
			writeSGR(&b, n.savedPen, nil)
			if n.savedX >= t.cols {
				b.WriteByte(' ') // a pending wrap, as writeCursor reaches one
			}
			cs := n.savedCS
			if cs == 0 {
				cs = 'B'
			}
			b.WriteString("\x1b(" + string(rune(cs)))
			var reach func()
			if n.savedX >= t.cols {
				reach = func() { b.WriteString("\x1b[" + strconv.Itoa(t.cols) + "G ") } // the line is erased next
			}
			writeDECSC(&b, n.savedPen, reach)
			b.WriteString("\x1b(B\x1b[0m\x1b[2K\r")
		}
		t.writeLineFrom(&b, l, from)
		savedHere := i == n.savedY && t.savedAbove() && from > 0 // saved below, with links of its own
		b.WriteString("\x1b[0m")
		if savedHere || i+1 >= len(lines) {
			t.linkTo(&b, 0)
		}
		if savedHere {
			// joined to the line before: saved once the line is written (a
			// pending wrap by writing its last cell again, as writeCursor)
			x := min(n.savedX, t.cols-1)
			if c := l.cells[x]; n.savedX >= t.cols && c.width == 0 && c.r == 0 && !c.comb && x > 0 && l.cells[x-1].width == 2 {
				x--
			}
			b.WriteString("\x1b[" + strconv.Itoa(x+1) + "G")
			if n.savedX >= t.cols {
				writeSGR(&b, t.styles.pens[l.cells[x].style], t.links)
				t.writeCellText(&b, l, x)
				b.WriteString("\x1b[0m\x1b]8;;\x07")
			}
			writeSGR(&b, n.savedPen, nil)
			cs := n.savedCS
			if cs == 0 {
				cs = 'B'
			}
			b.WriteString("\x1b(" + string(rune(cs)))
			cha := "\x1b[" + strconv.Itoa(x+1) + "G"
			var reach func()
			if n.savedX >= t.cols {
				reach = func() { b.WriteString(cha); t.writeCellText(&b, l, x) }
			}
			if writeDECSC(&b, n.savedPen, reach) {
				b.WriteString("\x1b(B" + cha)
				writeSGR(&b, t.styles.pens[l.cells[x].style], t.links)
				t.writeCellText(&b, l, x)
				b.WriteString("\x1b[0m\x1b]8;;\x07")
			}
			b.WriteString("\x1b(B\x1b[0m")
		}
		if i+1 < len(lines) && lines[i+1].wrapped {
			from = t.joinWrap(&b, l, lines[i+1], -1) // soft-wrapped, as xterm.js reflows it
		} else {
			b.WriteString("\r\n")
			from = 0
		}
	}
	return b.Bytes()
}
