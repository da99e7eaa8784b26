package terminal

import (
	"bytes"
	"strconv"
)

// A DECRC restores xterm.js's HAS_EXTENDED bit with the background and
// leaves the pen's extended attributes (underline style and colour,
// hyperlink) where they were: with the bit off they stay in the pen,
// unused, until an SGR 0/4/21/24/59 or OSC 8 sets it again. Only another
// DECRC makes such a pen, so the redraw makes it the same way: it sets the
// attributes, DECRCs a saved cursor whose bit is off, and turns the
// restored pen into the program's with SGRs that leave the extended
// attributes alone.

// hiddenExtended reports whether the pen holds extended attributes a
// DECRC switched off.
func hiddenExtended(p pen) bool {
	return p.flags&flagExtended == 0 && (p.ul != 0 || p.ulColor != 0 || p.link != 0)
}

// hideFrom picks the saved cursor whose DECRC can hide the pen's extended
// attributes: the active buffer's, or the alternate one's while the normal
// one is shown (entering it and leaving again changes nothing that is
// shown). It reports false when neither can: its pen has the bit set (the
// DECRC would set it too), its underline differs (only SGR 4 and 24 change
// that, and they set the bit), or its charset is neither the one in use
// nor the invoked level's; the normal buffer's saved cursor on a history
// line is not one the redraw writes. The cursor is then put back by CUP, so a
// pending wrap must be reached by writing its cell with the pen itself.
func (t *term) hideFrom() (*buffer, bool) {
	if !t.pendingWrapWritable() {
		return nil, false
	}
	y, ok := t.savedWithoutExtended()
	if !ok || y.savedCS != t.cs && t.cs != t.charsets[t.gl] {
		return nil, false
	}
	return y, true
}

// savedWithoutExtended is hideFrom's choice of saved cursor, whatever its
// charset.
func (t *term) savedWithoutExtended() (*buffer, bool) {
	cands := []*buffer{t.buf}
	if !t.altActive() {
		cands = append(cands, t.alt)
	}
	for _, y := range cands {
		if y == t.normal && t.savedAbove() {
			continue // history() writes it, and a redraw alone does not
		}
		s := y.savedPen
		if s.flags&flagExtended != 0 || s.flags&flagUnderline != t.pen.flags&flagUnderline {
			continue
		}
		return y, true
	}
	return nil, false
}

// pendingWrapWritable reports whether the cursor is not at a pending wrap,
// or is after a cell the pen wrote that writing again in the charset in
// use gives back.
func (t *term) pendingWrapWritable() bool {
	b := t.buf
	if b.x < t.cols {
		return true
	}
	l := b.row(b.y)
	last := t.lastCellAt(l)
	c := l.cells[last]
	if q := t.styles.pens[c.style]; c.style != t.styleOf(normalPen(cellPen(t.pen))) && !plainPen(q) {
		return false // written by SGRs the hidden attributes survive only without extended ones
	}
	if c.comb || (c.width == 2 && cutWide(l, last, t.cols)) || c.r == 0 {
		return false
	}
	return c.r >= 0x80 || t.cs == 0 || mapCharset(t.cs, c.r) == c.r
}

// plainPen reports whether p has no extended attribute and no underline:
// writeKeptSGR makes it from any pen without them.
func plainPen(p pen) bool {
	return p.ul == 0 && p.ulColor == 0 && p.link == 0 && p.flags&(flagUnderline|flagExtended) == 0
}

// lastCellAt is the column a pending wrap's cell starts at: the last one,
// or the wide character ending there.
func (t *term) lastCellAt(l *line) int {
	last := t.cols - 1
	if last > 0 && l.cells[last].width == 0 && l.cells[last].r == 0 && !l.cells[last].comb && l.cells[last-1].width == 2 {
		last--
	}
	return last
}

// writeHiddenPen makes the pen's extended attributes hidden, from saved
// cursor y (hideFrom), and leaves the cursor, the pen and the charset in
// use as the program left them. The rest of the redraw is written.
func (t *term) writeHiddenPen(b *bytes.Buffer, y *buffer) {
	p := t.pen
	b.WriteString("\x1b[0m\x1b]8;;\x07")
	var ps []string
	if p.ul != 0 {
		ps = append(ps, "4:"+strconv.Itoa(int(p.ul)))
	}
	if p.ulColor != 0 {
		ps = append(ps, colorSGR(58, p.ulColor))
	}
	writeParams(b, ps)
	if p.link != 0 {
		l := t.links[p.link]
		b.WriteString("\x1b]8;" + l.params + ";" + l.url + "\x07")
	}
	if y == t.buf {
		b.WriteString("\x1b8")
	} else {
		b.WriteString("\x1b[?47h\x1b8\x1b[?47l")
	}
	writeKeptSGR(b, y.savedPen, cellPen(p))
	if t.cs == t.charsets[t.gl] {
		t.writeCharsets(b, t.cs)
	}
	buf := t.buf
	if buf.x < t.cols {
		t.placeCursor(b, buf, false)
		return
	}
	// a pending wrap: its cell written again, in its own pen if another
	// one wrote it (a plain one), then the pen put back
	l := buf.row(buf.y)
	last := t.lastCellAt(l)
	row := buf.y
	if t.modes.origin {
		row -= buf.top
	}
	writeCUP(b, row, last)
	own, q := cellPen(p), t.styles.pens[l.cells[last].style]
	if normalPen(own) != q {
		writeKeptSGR(b, own, q)
	}
	b.WriteString(l.text(last))
	if normalPen(own) != q {
		writeKeptSGR(b, q, own)
	}
	writePastLine(b, buf.x, t.cols)
}

// writeKeptSGR turns pen from into to with SGRs that touch no extended
// attribute (no 0, 4, 21, 24, 58, 59): every flag but the underline, which
// the two share, and the colours.
func writeKeptSGR(b *bytes.Buffer, from, to pen) {
	var ps []string
	if from.flags&(flagBold|flagDim)&^to.flags != 0 {
		ps = append(ps, "22")
		from.flags &^= flagBold | flagDim
	}
	flags := []struct {
		f       uint16
		on, off string
	}{{flagBold, "1", ""}, {flagDim, "2", ""}, {flagItalic, "3", "23"}, {flagBlink, "5", "25"},
		{flagInverse, "7", "27"}, {flagInvisible, "8", "28"}, {flagStrike, "9", "29"}, {flagOverline, "53", "55"}}
	for _, f := range flags {
		switch {
		case to.flags&f.f != 0 && from.flags&f.f == 0:
			ps = append(ps, f.on)
		case to.flags&f.f == 0 && from.flags&f.f != 0:
			ps = append(ps, f.off)
		}
	}
	if to.fg != from.fg {
		ps = append(ps, colorSGR(38, to.fg))
	}
	if to.bg != from.bg {
		ps = append(ps, colorSGR(48, to.bg))
	}
	writeParams(b, ps)
	if from.flags&flagProtected != to.flags&flagProtected {
		if to.flags&flagProtected != 0 {
			b.WriteString("\x1b[1\"q")
		} else {
			b.WriteString("\x1b[0\"q")
		}
	}
}

func writeParams(b *bytes.Buffer, ps []string) {
	if len(ps) == 0 {
		return
	}
	b.WriteString("\x1b[")
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(p)
	}
	b.WriteByte('m')
}

// relinkPen writes again, in the pen's hyperlink opened once more, every
// cell of the screen that holds it, and leaves it open in the pen: the
// cells a program printed while a link without an id was open, and the
// cells it prints after a viewer attached, are one link in xterm.js, and
// the painted rows closed it long before the pen is set. It puts the
// cursor where buf has it (a pending wrap by writing its cell last) and
// reports false, writing nothing, where it cannot: a link with an id (any
// OSC 8 with it finds it again), none on the screen, or a pending wrap
// under origin mode or after a cell of another link, or underlined, or
// with no saved cursor to switch the link off by (savedWithoutExtended).
func (t *term) relinkPen(b *bytes.Buffer, buf *buffer) bool {
	p := cellPen(t.pen)
	if p.link == 0 || linkKey(t.links[p.link]) != (linkRef{}) {
		return false
	}
	type at struct{ y, x int }
	var cells []at
	for y := range t.rows {
		l := buf.row(y)
		for x := range min(len(l.cells), t.cols) {
			c := l.cells[x]
			if c.width == 0 && c.r == 0 && !c.comb {
				continue // a second half: its first writes it
			}
			if t.styles.pens[c.style].link == p.link {
				cells = append(cells, at{y, x})
			}
		}
	}
	if len(cells) == 0 {
		return false
	}
	pending := buf.x >= t.cols
	if pending && t.modes.origin {
		return false
	}
	last := -1
	var from *buffer // a pending wrap's cell of another pen: written after a DECRC from it
	if pending {
		l := buf.row(buf.y)
		last = t.lastCellAt(l)
		if q := t.styles.pens[l.cells[last].style]; q.link != p.link {
			y, ok := t.savedWithoutExtended()
			if !ok || q.link != 0 || q.flags&flagUnderline != 0 || y.savedPen.flags&flagUnderline != 0 {
				return false
			}
			from = y
		}
	}
	b.WriteString("\x1b(B\x1b)B\x1b*B\x1b+B\x0f") // the rows were written in ASCII
	if t.modes.origin {
		b.WriteString("\x1b[?6l") // every row in reach, set again below (it homes the cursor)
	}
	writeCUP(b, cells[0].y, cells[0].x)
	b.WriteString("\x1b[0m")
	r := t.links[p.link]
	b.WriteString("\x1b]8;" + r.params + ";" + r.url + "\x07")
	write := func(c at) {
		l := buf.row(c.y)
		writeCUP(b, c.y, c.x)
		b.WriteString("\x1b[0m") // keeps the link, as xterm.js's SGR 0 does
		writeSGR(b, t.styles.pens[l.cells[c.x].style], nil)
		t.writeCellText(b, l, c.x)
	}
	for _, c := range cells {
		if !(pending && c.y == buf.y && c.x == last) {
			write(c)
		}
	}
	switch {
	case pending && from != nil:
		// the pen keeps the link through a DECRC that switches it off, so
		// the cell is written without it (xterm.js's HAS_EXTENDED); the
		// SGR 0 the caller writes next switches it on again
		if from == t.buf {
			b.WriteString("\x1b8")
		} else {
			b.WriteString("\x1b[?47h\x1b8\x1b[?47l")
		}
		b.WriteString("\x1b(B\x1b)B\x1b*B\x1b+B\x0f")
		l := buf.row(buf.y)
		writeKeptSGR(b, from.savedPen, t.styles.pens[l.cells[last].style])
		writeCUP(b, buf.y, last)
		t.writeCellText(b, l, last)
		writePastLine(b, buf.x, t.cols)
		return true
	case pending:
		write(at{buf.y, last})
		writePastLine(b, buf.x, t.cols)
		return true
	}
	if t.modes.origin {
		b.WriteString("\x1b[?6h")
	}
	t.placeCursor(b, buf, false)
	return true
}
