package terminal

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// HistoryLines is how many lines scrolled off the top the emulator keeps,
// and so how much history a viewer attaching late is given: xterm.js's
// default scrollback. A viewer watching live keeps more of its own (5000
// lines, server/web/static/terminal.js); the daemon keeps this much per
// session whether anybody watches or not.
const HistoryLines = 1000

// replyQueue bounds the terminal query replies kept for a reader. Replies
// past it are dropped: a program that floods queries nobody answers must not
// grow memory or stall the emulator.
const replyQueue = 64

// Mouse protocols and encodings, as xterm.js names them.
const (
	mouseNone = iota
	mouseX10
	mouseVT200
	mouseDrag
	mouseAny
)

const (
	encDefault = iota
	encSGR
	encSGRPixels
)

// modes are the terminal modes xterm.js keeps (CoreService's modes and
// decPrivateModes, the mouse service's protocol and encoding).
type modes struct {
	appCursor, appKeypad, bracketedPaste, insert bool
	wraparound, origin, reverseWrap, sendFocus   bool
	syncOutput, convertEol                       bool
	mouse, mouseEnc                              int
	cursorStyle                                  int // 0 unset, 1 block, 2 underline, 3 bar
	cursorBlink                                  int // 0 unset, 1 blinking, 2 steady
}

func defaultModes() modes { return modes{wraparound: true} }

// term is the screen model behind an Emulator: a terminal that does what
// xterm.js does with the same bytes (xterm.js's InputHandler is the
// reference, proved by the differential tests against @xterm/headless),
// parsed by x/ansi's parser. Its fields are owned by the Emulator's
// goroutine, except replies, which it only sends on.
type term struct {
	cols, rows  int
	normal, alt *buffer
	buf         *buffer // the active one
	pen         pen
	styles      *styleTable
	lastPen     pen // the last pen interned, and its id: most writes reuse it
	lastID      uint16
	lastOK      bool
	links       []linkRef
	linkIndex   map[linkRef]uint16
	modes       modes
	hidden      bool
	// blinkOption is xterm.js's cursorBlink option, which mode 12 sets and
	// no reset touches (the viewer's xterm.js keeps it across redraws):
	// viewerCursorBlink until the program sets it
	blinkOption bool
	palette     map[int][3]uint8 // the colours OSC 4/10/11/12 set (palette.go)
	// charsets are the G0–G3 designations (0 for ASCII, else the final
	// byte: '0' DEC special graphics, 'A' UK, ...), gl the level invoked
	// and cs the charset in use (DECRC can make it differ from
	// charsets[gl], as in xterm.js).
	charsets [4]byte
	gl       int
	cs       byte
	precW    int // width of the last printed character, 0 when the next may not join it
	// inPrint is set within what xterm.js prints in one call: a run of
	// characters with nothing else between them (bytes its UTF-8 decoder
	// drops are nothing), or REP's copies. Such a call blanks a wide
	// character the cursor is just past only before its first character
	// (with autowrap off the cursor can stop past one, and the next
	// character of the run then overwrites its second half alone).
	inPrint bool
	// onByte follows what the parser did with each byte of a character
	// fed through streamState.feed, to end a print run (inPrint).
	onByte      func(byte, parser.Action)
	title, icon string
	stream      *streamState
	params      xparams
	fed         int64 // bytes written, the offset a redraw describes
	// wlink is the hyperlink a redraw being written left in the viewer's
	// pen (linkTo), while it paints rows and history
	wlink   uint16
	replies chan []byte
}

// viewerCursorBlink is the cursorBlink option the viewer's xterm.js is
// made with (server/web/static/terminal.js).
const viewerCursorBlink = true

// linkRef is one OSC 8 hyperlink. As in xterm.js, a link with an id is
// one link wherever it is printed (an OSC 8 with the same id and URI finds
// it: linkIndex, by linkKey), and every OSC 8 without one opens a link of
// its own, which holds the cells printed while it is open, across rows
// too; a redraw keeps them one (docs/DECISIONS.md).
type linkRef struct{ params, url string }

// linkKey is what finds an OSC 8's link again, xterm.js's "id;;uri": its
// id and URI, or nothing for a link without an id.
func linkKey(r linkRef) linkRef {
	for _, kv := range strings.Split(r.params, ":") {
		if id, ok := strings.CutPrefix(kv, "id="); ok {
			if id == "" {
				return linkRef{}
			}
			return linkRef{params: id, url: r.url}
		}
	}
	return linkRef{}
}

// compactLinks rebuilds the link table from the links the pen and cells
// still use, renumbering them in the style table.
func (t *term) compactLinks() {
	renum := map[uint16]uint16{0: 0}
	links := []linkRef{{}}
	keep := func(l uint16) uint16 {
		n, ok := renum[l]
		if !ok {
			n = uint16(len(links))
			links = append(links, t.links[l])
			renum[l] = n
		}
		return n
	}
	t.pen.link = keep(t.pen.link)
	old := t.styles
	t.styles, t.lastOK = newStyleTable(), false
	for _, b := range []*buffer{t.normal, t.alt} {
		for i := range b.n {
			l := b.at(i)
			for x := range l.cells {
				p := old.pens[l.cells[x].style]
				p.link = keep(p.link)
				l.cells[x].style, _ = t.styles.id(p)
			}
		}
	}
	t.links, t.linkIndex = links, map[linkRef]uint16{}
	for i, r := range links {
		if k := linkKey(r); k != (linkRef{}) {
			t.linkIndex[k] = uint16(i)
		}
	}
}

// newTerm builds a terminal of w×h with HistoryLines of scrollback.
func newTerm(w, h int) *term {
	t := &term{
		cols: w, rows: h, styles: newStyleTable(), linkIndex: map[linkRef]uint16{},
		links: []linkRef{{}}, modes: defaultModes(), stream: newStreamState(), blinkOption: viewerCursorBlink,
		replies: make(chan []byte, replyQueue),
	}
	t.stream.osc = &oscReader{} // x/ansi's data buffer (1 byte) is not read
	t.stream.p.SetHandler(ansi.Handler{
		Print: t.printRune, Execute: t.execute, HandleCsi: t.csi, HandleEsc: t.esc,
		HandleOsc: t.osc, HandleDcs: t.dcs,
	})
	t.stream.exec = t.execute
	t.onByte = func(_ byte, a parser.Action) {
		if a != parser.PrintAction && a != parser.CollectAction {
			t.inPrint = false
		}
	}
	t.normal = newBuffer(w, h, HistoryLines)
	t.alt = newBuffer(w, h, 0)
	t.normal.fillViewport(cell{width: 1})
	t.buf = t.normal
	return t
}

// close releases nothing but ends the replies channel.
func (t *term) close() {
	if t.replies != nil {
		close(t.replies)
		t.replies = nil
	}
}

func (t *term) reply(format string, args ...any) {
	if t.replies == nil {
		return
	}
	select {
	case t.replies <- fmt.Appendf(nil, format, args...):
	default:
	}
}

// altActive reports whether the alternate buffer is shown.
func (t *term) altActive() bool { return t.buf == t.alt }

// write feeds p to the terminal. Printable ASCII between sequences is
// written straight into the line, the rest through the parser.
func (t *term) write(p []byte) {
	t.fed += int64(len(p))
	for i := 0; i < len(p); {
		b := p[i]
		if b >= 0x20 && b < 0x7f && t.stream.p.State() == parser.GroundState {
			j := i + 1
			for j < len(p) && p[j] >= 0x20 && p[j] < 0x7f {
				j++
			}
			t.stream.u8len = 0 // a character cut short by ASCII vanishes (streamState.feed)
			t.printASCII(p[i:j])
			i = j
			continue
		}
		if (b == '\n' || b == '\r') && t.stream.p.State() == parser.GroundState {
			t.stream.u8len = 0
			t.inPrint = false
			t.execute(b)
			i++
			continue
		}
		if b < 0x80 { // escape sequences: no character can be pending past one
			t.stream.u8len = 0
			t.inPrint = false
			t.stream.advance(b)
		} else {
			t.stream.feed(b, t.onByte)
		}
		i++
	}
}

// styleOf interns p, compacting the table when it is full.
func (t *term) styleOf(p pen) uint16 {
	if t.lastOK && p == t.lastPen {
		return t.lastID
	}
	id, ok := t.styles.id(p)
	if !ok {
		t.compactStyles()
		id, _ = t.styles.id(p)
	}
	t.lastPen, t.lastID, t.lastOK = p, id, true
	return id
}

// compactStyles rebuilds the style table from the styles cells still use.
func (t *term) compactStyles() {
	old := t.styles
	t.styles, t.lastOK = newStyleTable(), false
	for _, b := range []*buffer{t.normal, t.alt} {
		for i := range b.n {
			l := b.at(i)
			for x := range l.cells {
				id, _ := t.styles.id(old.pens[l.cells[x].style])
				l.cells[x].style = id
			}
		}
	}
}

// curStyle is the style of cells the current pen writes.
func (t *term) curStyle() uint16 {
	return t.styleOf(normalPen(cellPen(t.pen)))
}

// cellPen is what a cell written with p holds: without flagExtended (a
// DECRC restores it from the saved cursor, as xterm.js restores
// HAS_EXTENDED with the background) the extended attributes stay in the
// pen, unused, until an SGR or OSC 8 that changes them sets it again.
// With it, an underline style underlines without the flag (xterm.js's
// isUnderline), which a DECRC can leave.
func cellPen(p pen) pen {
	if p.flags&flagExtended == 0 {
		p.ul, p.ulColor, p.link = 0, 0, 0
	} else if p.ul != 0 {
		p.flags |= flagUnderline
	}
	p.flags &^= flagExtended
	return p
}

// updateExtended is xterm.js's AttributeData.updateExtended, after an SGR
// (0, 4, 21, 24, 59) or OSC 8: the extended attributes are in use while
// the pen has an underline style or a hyperlink (a colour alone is not).
func (t *term) updateExtended() {
	if t.pen.ul != 0 || t.pen.link != 0 {
		t.pen.flags |= flagExtended
	} else {
		t.pen.flags &^= flagExtended
	}
}

// normalPen drops what a pen cannot show: DECRC restores the flags and not
// the underline style, as xterm.js does, so the flag can come without a
// style (a single underline) and a style without the flag (nothing).
func normalPen(p pen) pen {
	switch {
	case p.flags&flagUnderline == 0:
		p.ul = 0
	case p.ul == 0:
		p.ul = 1
	}
	return p
}

// eraseCell is an erased cell: the current background colour and nothing
// else (xterm.js's _eraseAttrData).
func (t *term) eraseCell() cell {
	if t.pen.bg == 0 {
		return cell{width: 1}
	}
	return cell{width: 1, style: t.styleOf(pen{bg: t.pen.bg})}
}

// restrictCursor is xterm.js's _restrictCursor.
func (t *term) restrictCursor(maxCol int) {
	b := t.buf
	b.x = min(maxCol, max(0, b.x))
	if t.modes.origin {
		b.y = min(b.bottom, max(b.top, b.y))
	} else {
		b.y = min(t.rows-1, max(0, b.y))
	}
}

func (t *term) setCursor(x, y int) {
	b := t.buf
	b.x = x
	if t.modes.origin {
		b.y = b.top + y
	} else {
		b.y = y
	}
	t.restrictCursor(t.cols - 1)
}

func (t *term) moveCursor(dx, dy int) {
	t.restrictCursor(t.cols - 1)
	t.setCursor(t.buf.x+dx, t.buf.y+dy)
}

// printASCII prints a run of printable ASCII, the hot path of bulk output.
func (t *term) printASCII(s []byte) {
	if t.cs != 0 || t.modes.insert {
		for _, c := range s {
			t.printRune(rune(c))
		}
		return
	}
	b := t.buf
	style := t.curStyle()
	row := b.row(b.y)
	if !t.inPrint && b.x > 0 && b.x <= t.cols && row.cells[b.x-1].width == 2 {
		row.set(b.x-1, cell{width: 1, style: style})
	}
	t.inPrint = true
	for _, c := range s {
		if b.x >= t.cols {
			if !t.modes.wraparound {
				b.x = t.cols - 1
			} else {
				t.wrapLine(row, b.x, style)
				row = b.row(b.y)
			}
		}
		row.cells[b.x] = cell{r: rune(c), width: 1, style: style}
		b.x++
	}
	t.precW = 1
	if b.x < t.cols && row.cells[b.x].width == 0 && row.cells[b.x].r == 0 {
		row.set(b.x, cell{width: 1, style: style})
	}
}

// wrapLine moves the cursor to the start of the next line for a character
// that does not fit, as xterm.js's print does; cells from oldCol to the
// margin of the row left are blanked.
func (t *term) wrapLine(row *line, oldCol int, style uint16) {
	b := t.buf
	b.x = 0
	b.y++
	if b.y == b.bottom+1 {
		b.y--
		b.scroll(t.eraseCell(), true)
	} else {
		if b.y >= t.rows {
			b.y = t.rows - 1
		}
		b.row(b.y).wrapped = true
	}
	for ; oldCol < t.cols; oldCol++ {
		row.set(oldCol, cell{width: 1, style: style})
	}
}

// printRune is xterm.js's print for one code point.
func (t *term) printRune(r rune) {
	if r < 127 && t.cs != 0 {
		r = mapCharset(t.cs, r)
	}
	b := t.buf
	style := t.curStyle()
	row := b.row(b.y)
	if !t.inPrint && b.x > 0 && b.x <= t.cols && row.cells[b.x-1].width == 2 {
		row.set(b.x-1, cell{width: 1, style: style})
	}
	t.inPrint = true
	w := runeWidth(r)
	join := w == 0 && t.precW != 0
	oldW := 0
	if join {
		oldW = t.precW
		w = oldW
	}
	t.precW = w
	if join {
		t.precW = oldW
	}
	if b.x+w-oldW > t.cols {
		if t.modes.wraparound {
			oldCol := b.x - oldW
			old := row
			t.wrapLineKeep(old, oldCol, oldW, style)
			row = b.row(b.y)
		} else {
			b.x = t.cols - 1
			if w == 2 {
				// dropped; xterm.js's print still ends by making the
				// second half of a wide character at the cursor a blank
				if c := row.cells[b.x]; c.width == 0 && c.r == 0 {
					row.set(b.x, cell{width: 1, style: style})
				}
				return
			}
		}
	}
	if join && b.x > 0 {
		off := 1
		if row.cells[b.x-1].width == 0 {
			off = 2
		}
		t.addCodepoint(row, b.x-off, r)
		return
	}
	if t.modes.insert {
		row.insertCells(b.x, w-oldW, cell{width: 1, style: style})
		if row.cells[t.cols-1].width == 2 {
			row.set(t.cols-1, cell{width: 1, style: style})
		}
	}
	if b.x >= t.cols { // a zero-width character at a pending wrap: xterm.js writes past the line
		b.x++
		return
	}
	row.set(b.x, cell{r: r, width: uint8(w), style: style})
	b.x++
	for i := 1; i < w; i++ {
		if b.x < t.cols { // a wide character in a one-column terminal
			row.set(b.x, cell{width: 0, style: style})
		}
		b.x++
	}
	if b.x < t.cols && row.cells[b.x].width == 0 && row.cells[b.x].r == 0 {
		row.set(b.x, cell{width: 1, style: style})
	}
}

// wrapLineKeep wraps like wrapLine and carries the oldW cells before
// oldCol's end (a character a combining mark widens) to the new line.
func (t *term) wrapLineKeep(old *line, oldCol, oldW int, style uint16) {
	b := t.buf
	var carried []cell
	var texts []string
	for i := range oldW {
		carried = append(carried, old.cells[oldCol+i])
		texts = append(texts, old.text(oldCol+i))
	}
	t.wrapLine(old, oldCol, style)
	b.x = oldW
	row := b.row(b.y)
	for i, c := range carried {
		row.set(i, c)
		if c.comb {
			setComb(row, i, texts[i])
		}
	}
}

func setComb(l *line, x int, s string) {
	if l.comb == nil {
		l.comb = map[int]string{}
	}
	l.comb[x] = s
	l.cells[x].comb = true
}

// addCodepoint joins r to the character in cell x.
func (t *term) addCodepoint(l *line, x int, r rune) {
	s := l.text(x) + string(r)
	if l.cells[x].r == 0 && !l.cells[x].comb {
		s = string(r)
		l.cells[x].r = r
		return
	}
	setComb(l, x, s)
}

// execute runs a C0 control (and the C1 controls xterm.js knows).
func (t *term) execute(c byte) {
	if c == 0x7f { // DEL: x/ansi executes it; for xterm.js it is nothing, not even the end of a join
		return
	}
	t.precW = 0
	switch c {
	case '\n', '\v', '\f':
		t.lineFeed()
	case '\r':
		t.buf.x = 0
	case '\b':
		t.backspace()
	case '\t':
		if t.buf.x < t.cols {
			t.buf.x = t.buf.nextStop(t.buf.x)
		}
	case 0x0e:
		t.setGLevel(1)
	case 0x0f:
		t.setGLevel(0)
	case 0x84:
		t.index()
	case 0x85:
		t.buf.x = 0
		t.index()
	case 0x88:
		t.tabSet()
	}
}

func (t *term) lineFeed() {
	b := t.buf
	if t.modes.convertEol {
		b.x = 0
	}
	b.y++
	if b.y == b.bottom+1 {
		b.y--
		b.scroll(t.eraseCell(), false)
	} else if b.y >= t.rows {
		b.y = t.rows - 1
	} else {
		b.row(b.y).wrapped = false
	}
	if b.x >= t.cols {
		b.x--
	}
}

func (t *term) backspace() {
	b := t.buf
	if !t.modes.reverseWrap {
		t.restrictCursor(t.cols - 1)
		if b.x > 0 {
			b.x--
		}
		return
	}
	t.restrictCursor(t.cols)
	if b.x > 0 {
		b.x--
	} else if b.y > b.top && b.y <= b.bottom && b.row(b.y).wrapped {
		b.row(b.y).wrapped = false
		b.y--
		b.x = t.cols - 1
		if l := b.row(b.y); l.cells[b.x].width != 0 && l.cells[b.x].r == 0 && !l.cells[b.x].comb {
			b.x--
		}
	}
	t.restrictCursor(t.cols - 1)
}

func (t *term) index() {
	t.restrictCursor(t.cols - 1)
	b := t.buf
	b.y++
	if b.y == b.bottom+1 {
		b.y--
		b.scroll(t.eraseCell(), false)
	} else if b.y >= t.rows {
		b.y = t.rows - 1
	}
	t.restrictCursor(t.cols - 1)
}

func (t *term) reverseIndex() {
	t.restrictCursor(t.cols - 1)
	b := t.buf
	if b.y == b.top {
		b.rotate(b.top, b.bottom, false).reset(b.cols, t.eraseCell())
	} else {
		b.y--
		t.restrictCursor(t.cols - 1)
	}
}

// tabSet is HTS; at a pending wrap it sets a stop at column cols, which
// only a wider screen uses (as in xterm.js).
func (t *term) tabSet() {
	b := t.buf
	if b.x >= len(b.tabs) {
		b.tabs = append(b.tabs, make([]bool, b.x+1-len(b.tabs))...)
	}
	b.tabs[b.x] = true
}

func (t *term) setGLevel(g int) {
	t.gl = g
	t.cs = t.charsets[g]
}

func (t *term) setCharset(g int, cs byte) {
	t.charsets[g] = cs
	if t.gl == g {
		t.cs = cs
	}
}

func (t *term) saveCursor() {
	b := t.buf
	b.savedX, b.savedY = b.x, b.ybase()+b.y
	b.savedPen = pen{fg: t.pen.fg, bg: t.pen.bg, flags: t.pen.flags}
	b.savedCS = t.cs
}

func (t *term) restoreCursor() {
	b := t.buf
	b.x = b.savedX
	b.y = max(b.savedY-b.ybase(), 0)
	t.pen.fg, t.pen.bg, t.pen.flags = b.savedPen.fg, b.savedPen.bg, b.savedPen.flags
	t.cs = b.savedCS
	t.restrictCursor(t.cols - 1)
}

// activateAlt and activateNormal are xterm.js's BufferSet switches.
func (t *term) activateAlt() {
	if t.altActive() {
		return
	}
	t.alt.fillViewport(t.eraseCell())
	t.alt.x, t.alt.y = t.normal.x, t.normal.y
	t.buf = t.alt
}

func (t *term) activateNormal() {
	if !t.altActive() {
		return
	}
	t.normal.x, t.normal.y = t.alt.x, t.alt.y
	t.alt.clear()
	t.buf = t.normal
}

// fullReset is RIS as xterm.js does it: everything but the title.
func (t *term) fullReset() {
	t.pen = pen{}
	t.normal = newBuffer(t.cols, t.rows, HistoryLines)
	t.alt = newBuffer(t.cols, t.rows, 0)
	t.normal.fillViewport(cell{width: 1})
	t.buf = t.normal
	t.charsets, t.gl, t.cs = [4]byte{}, 0, 0
	eol := t.modes.convertEol // LNM is xterm.js's convertEol option, which no reset touches
	t.modes = defaultModes()
	t.modes.convertEol = eol
	t.styles, t.lastOK = newStyleTable(), false
	t.links, t.linkIndex = []linkRef{{}}, map[linkRef]uint16{}
}

// resize is xterm.js's Terminal.resize: both buffers change, the normal
// one reflowed (reflow.go), the alternate one not; sizes below 2×1 are
// raised to it, as xterm.js does.
func (t *term) resize(w, h int) {
	w, h = max(w, minCols), max(h, 1)
	if w == t.cols && h == t.rows {
		return
	}
	t.normal.resize(w, h, true)
	t.alt.resize(w, h, false)
	t.cols, t.rows = w, h
}

// minCols is xterm.js's MINIMUM_COLS.
const minCols = 2

// history lines, oldest first: the normal buffer's lines above its screen.
func (t *term) historyLines() []*line {
	b := t.normal
	out := make([]*line, 0, b.ybase())
	for i := range b.ybase() {
		out = append(out, b.at(i))
	}
	return out
}
