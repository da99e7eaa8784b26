package terminal

import "sort"

// The screen model: what xterm.js (the viewers' renderer) keeps for a
// terminal, kept the same way, so that a redraw built from it shows what a
// viewer fed the program's own bytes shows. Lines live in a ring, so a
// scroll moves no cells; a cell is 8 bytes, its attributes an index into a
// table of the styles in use.

// Colour modes, as xterm.js keeps them (Attributes.CM_*).
const (
	colorDefault = 0
	colorP16     = 1
	colorP256    = 2
	colorRGB     = 3
)

// color is a colour mode in the top byte and its value (palette index or
// 0xRRGGBB) below.
type color uint32

func mkColor(mode int, value int) color { return color(uint32(mode)<<24 | uint32(value)&0xFFFFFF) }
func (c color) mode() int               { return int(c >> 24) }
func (c color) value() int              { return int(c & 0xFFFFFF) }

// Flags of a pen, xterm.js's FgFlags and BgFlags.
const (
	flagBold = 1 << iota
	flagDim
	flagItalic
	flagUnderline
	flagBlink
	flagInverse
	flagInvisible
	flagStrike
	flagOverline
	flagProtected // DECSCA: selective erase (DECSED, DECSEL) leaves the cell
	// flagExtended is xterm.js's HAS_EXTENDED: the pen's underline style,
	// underline colour and hyperlink reach the cells it writes only while
	// it is set. A pen's own, never a cell's (cellPen).
	flagExtended
)

// pen is everything a cell's appearance carries.
type pen struct {
	fg, bg  color
	flags   uint16
	ul      uint8 // underline style 1–5 while flagUnderline is set
	ulColor color
	link    uint16 // index into the links table, 0 for none
}

// cell is one column of a line: the code point written there (0 for an
// erased cell; combined code points are kept in the line), its width as
// xterm.js counts it (the cell after a wide character has width 0 and no
// content), and its style.
type cell struct {
	r     rune
	style uint16
	width uint8
	comb  bool // the line's comb map holds the full text
}

// line is one row, on the screen or in history.
type line struct {
	cells   []cell
	comb    map[int]string // text of cells with comb set, by column
	wrapped bool
}

func newLine(cols int, fill cell) *line {
	l := &line{cells: make([]cell, cols)}
	l.fill(fill)
	return l
}

func (l *line) fill(c cell) {
	for i := range l.cells {
		l.cells[i] = c
	}
	l.comb = nil
}

// set writes c at x. Combined text left in comb for a cell that is no
// longer combined stays, unread, as xterm.js's does: a reflow's copy moves
// it (copyCells), so keeping it keeps reflow the same.
func (l *line) set(x int, c cell) {
	l.cells[x] = c
}

// text returns the characters of the cell at x.
func (l *line) text(x int) string {
	c := l.cells[x]
	if c.comb {
		return l.comb[x]
	}
	if c.r == 0 {
		return ""
	}
	return string(c.r)
}

// copyCell copies the cell at from to to, with its combined text.
func (l *line) copyCell(to, from int) {
	c := l.cells[from]
	l.set(to, c)
	if c.comb {
		if l.comb == nil {
			l.comb = map[int]string{}
		}
		l.comb[to] = l.comb[from]
	}
}

// insertCells is xterm.js's BufferLine.insertCells.
func (l *line) insertCells(pos, n int, fill cell) {
	w := len(l.cells)
	pos %= w
	if pos > 0 && l.cells[pos-1].width == 2 {
		l.set(pos-1, blankOf(fill))
	}
	if n < w-pos {
		for i := w - pos - n - 1; i >= 0; i-- {
			l.copyCell(pos+n+i, pos+i)
		}
		for i := 0; i < n; i++ {
			l.set(pos+i, fill)
		}
	} else {
		for i := pos; i < w; i++ {
			l.set(i, fill)
		}
	}
	if l.cells[w-1].width == 2 {
		l.set(w-1, blankOf(fill))
	}
}

// deleteCells is xterm.js's BufferLine.deleteCells.
func (l *line) deleteCells(pos, n int, fill cell) {
	w := len(l.cells)
	pos %= w
	if n < w-pos {
		for i := 0; i < w-pos-n; i++ {
			l.copyCell(pos+i, pos+n+i)
		}
		for i := w - n; i < w; i++ {
			l.set(i, fill)
		}
	} else {
		for i := pos; i < w; i++ {
			l.set(i, fill)
		}
	}
	if pos > 0 && l.cells[pos-1].width == 2 {
		l.set(pos-1, blankOf(fill))
	}
	if l.cells[pos].width == 0 && l.cells[pos].r == 0 {
		l.set(pos, blankOf(fill))
	}
}

// replaceCells is xterm.js's BufferLine.replaceCells: cells start..end-1
// become fill, and a wide character cut in half at either end is blanked.
func (l *line) replaceCells(start, end int, fill cell) {
	w := len(l.cells)
	if start > 0 && start <= w && l.cells[start-1].width == 2 {
		l.set(start-1, blankOf(fill))
	}
	if end < w && end > 0 && l.cells[end-1].width == 2 {
		l.set(end, blankOf(fill))
	}
	for ; start < end && start < w; start++ {
		l.set(start, fill)
	}
}

// replaceUnprotected is replaceCells with respectProtect (DECSED,
// DECSEL): protected cells stay, and a wide character cut at either end is
// blanked only when the cell that decides is not protected, as xterm.js
// has it.
func (l *line) replaceUnprotected(start, end int, fill cell, protected func(cell) bool) {
	w := len(l.cells)
	if start > 0 && start <= w && l.cells[start-1].width == 2 && !protected(l.cells[start-1]) {
		l.set(start-1, blankOf(fill))
	}
	if end < w && end > 0 && l.cells[end-1].width == 2 && !protected(l.cells[end]) {
		l.set(end, blankOf(fill))
	}
	for ; start < end && start < w; start++ {
		if !protected(l.cells[start]) {
			l.set(start, fill)
		}
	}
}

// resize is xterm.js's BufferLine.resize: new cells are fill, cells cut
// off go with their combined text, and a wide character whose second half
// is cut off stays (xterm.js keeps it; only a resize makes one).
func (l *line) resize(cols int, fill cell) {
	old := len(l.cells)
	if cols <= old {
		for x := range l.comb {
			if x >= cols {
				delete(l.comb, x)
			}
		}
		l.cells = l.cells[:cols:cols]
		return
	}
	l.cells = append(l.cells, make([]cell, cols-old)...)
	for x := old; x < cols; x++ {
		l.cells[x] = fill
	}
}

// hasContent is xterm.js's hasContent: a code point or combined text.
func (l *line) hasContent(x int) bool {
	if x < 0 || x >= len(l.cells) {
		return false
	}
	c := l.cells[x]
	return c.r != 0 || c.comb
}

// widthAt is the width of cell x, 0 past the line's end (a JavaScript
// typed array read out of range).
func (l *line) widthAt(x int) int {
	if x < 0 || x >= len(l.cells) {
		return 0
	}
	return int(l.cells[x].width)
}

// trimmedLength is xterm.js's getTrimmedLength: the end of the last cell
// with content.
func (l *line) trimmedLength() int {
	for x := len(l.cells) - 1; x >= 0; x-- {
		if c := l.cells[x]; c.r != 0 || c.comb {
			return x + int(c.width)
		}
	}
	return 0
}

// copyCells is xterm.js's copyCellsFrom: n cells of src from srcCol to
// destCol (backwards when reverse, for a copy to the right within a line),
// then the combined text of every src column from srcCol on, in column
// order, read as it is then (so a copy within a line can read what it has
// just written, as xterm.js does).
func (l *line) copyCells(src *line, srcCol, destCol, n int, reverse bool) {
	one := func(i int) {
		// out of range, a typed array reads zeros (an empty zero-width
		// cell) and drops writes: a wide character cut at the end of a
		// line counts a cell past it
		if d := destCol + i; d >= 0 && d < len(l.cells) {
			var c cell
			if s := srcCol + i; s >= 0 && s < len(src.cells) {
				c = src.cells[s]
			}
			l.cells[d] = c
		}
	}
	if reverse {
		for i := n - 1; i >= 0; i-- {
			one(i)
		}
	} else {
		for i := 0; i < n; i++ {
			one(i)
		}
	}
	if len(src.comb) == 0 {
		return
	}
	for _, k := range sortedKeys(src.comb) {
		if k >= srcCol {
			if l.comb == nil {
				l.comb = map[int]string{}
			}
			l.comb[k-srcCol+destCol] = src.comb[k]
		}
	}
}

// reset makes l a blank line of cols cells, as a line xterm.js creates
// (getBlankLine) in its place.
func (l *line) reset(cols int, fill cell) {
	l.cells = resizeCells(l.cells, cols)
	l.fill(fill)
	l.wrapped = false
}

// blankOf is an empty one-column cell with fill's style.
func blankOf(fill cell) cell { return cell{width: 1, style: fill.style} }

// styleTable interns pens: cells hold a uint16 index. Index 0 is the
// default pen.
type styleTable struct {
	pens  []pen
	index map[pen]uint16
}

func newStyleTable() *styleTable {
	return &styleTable{pens: []pen{{}}, index: map[pen]uint16{{}: 0}}
}

// maxStyles bounds the table; past it the terminal compacts it to the
// styles still in use (see term.compactStyles).
const maxStyles = 1 << 16

func (s *styleTable) id(p pen) (uint16, bool) {
	if i, ok := s.index[p]; ok {
		return i, true
	}
	if len(s.pens) >= maxStyles {
		return 0, false
	}
	i := uint16(len(s.pens))
	s.pens = append(s.pens, p)
	s.index[p] = i
	return i, true
}

// buffer is one of xterm.js's two buffers: the normal one, whose lines
// scrolled off the top stay as history, and the alternate one, which keeps
// none. Its lines are a ring of at most rows+scrollback lines; the screen
// is the last rows of them.
type buffer struct {
	ring       []*line
	start, n   int // ring index of the oldest line; lines held
	max        int // rows + scrollback
	rows, cols int
	scrollback int

	x, y        int // cursor; x == cols is a pending wrap
	top, bottom int // scroll region, inclusive rows
	savedX      int
	savedY      int // absolute line (ybase + y) as xterm.js saves it
	savedPen    pen // only fg, bg and flags are restored
	savedCS     byte
	tabs        []bool
}

func newBuffer(cols, rows, scrollback int) *buffer {
	b := &buffer{rows: rows, cols: cols, scrollback: scrollback, max: rows + scrollback}
	b.clear()
	return b
}

// clear is xterm.js's Buffer.clear: no lines, cursor home, full region.
func (b *buffer) clear() {
	b.ring, b.start, b.n, b.max = nil, 0, 0, b.rows+b.scrollback
	b.x, b.y, b.top, b.bottom = 0, 0, 0, b.rows-1
	b.setupTabs()
}

// setupTabs is xterm.js's setupTabStops(): a stop every 8 columns from
// column 0, which has one too: no tab moves to it, but TBC can clear it and
// the redraw must carry that.
func (b *buffer) setupTabs() {
	b.tabs = make([]bool, b.cols)
	for i := 0; i < b.cols; i += 8 {
		b.tabs[i] = true
	}
}

// extendTabs is xterm.js's setupTabStops(cols) after a resize: stops every
// 8 columns from the last stop before the new width on. Stops past the
// width stay, unused until the width grows again, as in xterm.js.
func (b *buffer) extendTabs() {
	if len(b.tabs) < b.cols {
		b.tabs = append(b.tabs, make([]bool, b.cols-len(b.tabs))...)
	}
	i := b.cols
	if i >= len(b.tabs) || !b.tabs[i] {
		i = b.prevStop(i)
	}
	for ; i < b.cols; i += 8 {
		b.tabs[i] = true
	}
}

// fillViewport is xterm.js's fillViewportRows: an empty buffer gets rows
// blank lines.
func (b *buffer) fillViewport(fill cell) {
	if b.n == 0 {
		for range b.rows {
			b.push(fill)
		}
	}
}

func (b *buffer) ybase() int { return b.n - b.rows }

// at returns line i, counting from the oldest.
func (b *buffer) at(i int) *line {
	return b.ring[(b.start+i)%len(b.ring)]
}

func (b *buffer) setAt(i int, l *line) {
	b.ring[(b.start+i)%len(b.ring)] = l
}

// row returns screen row y.
func (b *buffer) row(y int) *line { return b.at(b.n - b.rows + y) }

// push appends a blank line, reusing the oldest when the ring is full.
func (b *buffer) push(fill cell) *line {
	if b.n < b.max {
		if len(b.ring) < b.max && b.n == len(b.ring) {
			b.normalize()
			l := newLine(b.cols, fill)
			b.ring = append(b.ring, l)
			b.n++
			return l
		}
		l := b.at(b.n)
		b.n++
		l.cells = resizeCells(l.cells, b.cols)
		l.fill(fill)
		l.wrapped = false
		return l
	}
	l := b.at(0)
	b.start = (b.start + 1) % len(b.ring)
	l.cells = resizeCells(l.cells, b.cols)
	l.fill(fill)
	l.wrapped = false
	return l
}

func resizeCells(c []cell, cols int) []cell {
	if cap(c) >= cols {
		return c[:cols]
	}
	return make([]cell, cols)
}

// rotate moves screen rows first..last by one: up (the first comes out
// at the end) or down (the last comes out at the start); it returns the
// line that came out, to be blanked by the caller.
func (b *buffer) rotate(first, last int, up bool) *line {
	base := b.ybase()
	if up {
		l := b.at(base + first)
		for y := first; y < last; y++ {
			b.setAt(base+y, b.at(base+y+1))
		}
		b.setAt(base+last, l)
		return l
	}
	l := b.at(base + last)
	for y := last; y > first; y-- {
		b.setAt(base+y, b.at(base+y-1))
	}
	b.setAt(base+first, l)
	return l
}

// scroll is xterm.js's BufferService.scroll: the region moves up a line; a
// region at the top sends its first line into history.
func (b *buffer) scroll(fill cell, wrapped bool) {
	if b.top == 0 {
		l := b.push(fill)
		l.wrapped = wrapped
		if b.bottom != b.rows-1 {
			b.rotate(b.bottom, b.rows-1, false)
		}
		return
	}
	l := b.rotate(b.top, b.bottom, true)
	l.reset(b.cols, fill)
	l.wrapped = wrapped
}

// nextStop and prevStop are xterm.js's tab stop searches.
func (b *buffer) nextStop(x int) int {
	for x++; x < b.cols && !b.tabs[x]; x++ {
	}
	if x >= b.cols {
		return b.cols - 1
	}
	return x
}

func (b *buffer) prevStop(x int) int {
	for x--; x > 0 && (x >= b.cols || !b.tabs[x]); x-- {
	}
	if x >= b.cols {
		return b.cols - 1
	}
	return max(x, 0)
}

// trimHistory drops every history line (ED 3).
func (b *buffer) trimHistory() {
	drop := b.ybase()
	if drop <= 0 {
		return
	}
	b.start = (b.start + drop) % len(b.ring)
	b.n -= drop // the saved row stays as it is: xterm.js leaves it
}

// normalize puts the ring's lines in order from index 0, so it can grow.
func (b *buffer) normalize() {
	if b.start == 0 {
		return
	}
	lines := make([]*line, len(b.ring), cap(b.ring))
	for i := range b.ring {
		lines[i] = b.ring[(b.start+i)%len(b.ring)]
	}
	b.ring, b.start = lines, 0
}

// sortedKeys returns a map's keys in order, for deterministic output.
func sortedKeys(m map[int]string) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
