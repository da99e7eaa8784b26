package terminal

import (
	"sort"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// widthRange is a run of code points of one width (widths_table.go).
type widthRange struct {
	lo, hi rune
	w      uint8
}

// bmpWidths holds the width of every code point below 0x10000.
var bmpWidths = func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for i := range t {
		t[i] = 1
	}
	for _, r := range xtermWidths {
		for c := r.lo; c <= r.hi && c < 0x10000; c++ {
			t[c] = r.w
		}
	}
	return &t
}()

// runeWidth is xterm.js's wcwidth with the Unicode 11 add-on.
func runeWidth(r rune) int {
	if r < 0x10000 {
		if r < 0 {
			return 1
		}
		return int(bmpWidths[r])
	}
	i := sort.Search(len(xtermWidths), func(i int) bool { return xtermWidths[i].hi >= r })
	if i < len(xtermWidths) && xtermWidths[i].lo <= r {
		return int(xtermWidths[i].w)
	}
	return 1
}

func mapCharset(cs byte, r rune) rune {
	if m, ok := xtermCharsets[cs][r]; ok {
		return m
	}
	return r
}

// xparams are a CSI's parameters as xterm.js sees them: main parameters
// (missing is 0) with their colon sub-parameters (missing is -1), and at
// least one main parameter.
type xparams struct {
	main []int
	sub  [][]int
}

func (x *xparams) load(p ansi.Params, clamped uint64) {
	x.main, x.sub = x.main[:0], x.sub[:0]
	inSub := false
	for i, q := range p {
		v := q.Param(-1)
		if i < 64 && clamped&(1<<i) != 0 {
			v = maxParam // fed as fedMaxParam (streamState.release)
		}
		if inSub {
			x.sub[len(x.sub)-1] = append(x.sub[len(x.sub)-1], v)
		} else {
			x.main = append(x.main, max(v, 0))
			x.sub = append(x.sub, nil)
		}
		inSub = q.HasMore()
	}
	if len(x.main) == 0 {
		x.main = append(x.main, 0)
		x.sub = append(x.sub, nil)
	}
}

// get returns main parameter i, 0 when missing.
func (x *xparams) get(i int) int {
	if i < len(x.main) {
		return x.main[i]
	}
	return 0
}

// or1 is xterm.js's `params.params[i] || 1`.
func (x *xparams) or1(i int) int {
	if v := x.get(i); v != 0 {
		return v
	}
	return 1
}

func (t *term) csi(cmd ansi.Cmd, p ansi.Params) {
	prec := t.precW // REP repeats what was printed just before it
	t.precW = 0
	if t.stream.inters > 1 {
		return // no sequence of xterm.js's has two intermediates (x/ansi kept the last)
	}
	t.params.load(p, t.stream.clamped)
	x := &t.params
	b := t.buf
	switch cmd.Prefix() {
	case '?':
		t.csiPrivate(cmd, x)
		return
	case '>':
		if cmd.Final() == 'c' && cmd.Intermediate() == 0 && x.get(0) == 0 {
			t.reply("\x1b[>0;276;0c")
		}
		return
	case 0:
	default:
		return
	}
	switch cmd.Intermediate() {
	case ' ':
		switch cmd.Final() {
		case '@':
			t.scrollLeft(x.or1(0), false)
		case 'A':
			t.scrollLeft(x.or1(0), true)
		case 'q':
			t.setCursorStyle(x.get(0))
		}
		return
	case '!':
		if cmd.Final() == 'p' {
			t.softReset()
		}
		return
	case '"':
		if cmd.Final() == 'q' { // DECSCA, xterm.js's selectProtected
			switch x.get(0) {
			case 1:
				t.pen.flags |= flagProtected
			case 0, 2:
				t.pen.flags &^= flagProtected
			}
		}
		return
	case '\'':
		switch cmd.Final() {
		case '}':
			t.columns(x.or1(0), true)
		case '~':
			t.columns(x.or1(0), false)
		}
		return
	case '$':
		if cmd.Final() == 'p' {
			t.requestMode(x.get(0), true)
		}
		return
	case 0:
	default:
		return
	}
	switch cmd.Final() {
	case '@':
		t.restrictCursor(t.cols - 1)
		b.row(b.y).insertCells(b.x, x.or1(0), t.eraseCell())
	case 'A':
		n := x.or1(0)
		if d := b.y - b.top; d >= 0 {
			n = min(d, n)
		}
		t.moveCursor(0, -n)
	case 'B':
		n := x.or1(0)
		if d := b.bottom - b.y; d >= 0 {
			n = min(d, n)
		}
		t.moveCursor(0, n)
	case 'C', 'a':
		t.moveCursor(x.or1(0), 0)
	case 'D':
		t.moveCursor(-x.or1(0), 0)
	case 'E', 'F':
		n := x.or1(0)
		if cmd.Final() == 'E' {
			if d := b.bottom - b.y; d >= 0 {
				n = min(d, n)
			}
			t.moveCursor(0, n)
		} else {
			if d := b.y - b.top; d >= 0 {
				n = min(d, n)
			}
			t.moveCursor(0, -n)
		}
		b.x = 0
	case 'G', '`':
		t.setCursor(x.or1(0)-1, b.y)
	case 'H', 'f':
		col := 0
		if len(x.main) >= 2 {
			col = x.or1(1) - 1
		}
		t.setCursor(col, x.or1(0)-1)
	case 'I':
		if b.x < t.cols {
			for range min(x.or1(0), t.cols) { // past the last stop nothing moves
				b.x = b.nextStop(b.x)
			}
		}
	case 'Z':
		if b.x < t.cols {
			for range min(x.or1(0), t.cols) {
				b.x = b.prevStop(b.x)
			}
		}
	case 'J':
		t.eraseInDisplay(x.get(0), false)
	case 'K':
		t.eraseInLine(x.get(0), false)
	case 'L':
		t.insertLines(x.or1(0), true)
	case 'M':
		t.insertLines(x.or1(0), false)
	case 'P':
		t.restrictCursor(t.cols - 1)
		b.row(b.y).deleteCells(b.x, x.or1(0), t.eraseCell())
	case 'S':
		// xterm.js scrolls once per count; past the region's height every
		// line is a new one, so the rest change nothing (a count of 2³¹
		// took the emulator minutes)
		for range min(x.or1(0), b.bottom-b.top+1) {
			b.rotate(b.top, b.bottom, true).reset(b.cols, t.eraseCell())
		}
	case 'T':
		for range min(x.or1(0), b.bottom-b.top+1) {
			b.rotate(b.top, b.bottom, false).reset(b.cols, cell{width: 1})
		}
	case 'X':
		t.restrictCursor(t.cols - 1)
		b.row(b.y).replaceCells(b.x, b.x+x.or1(0), t.eraseCell())
	case 'b':
		t.repeatPreceding(x.or1(0), prec)
	case 'c':
		if x.get(0) == 0 {
			t.reply("\x1b[?1;2c")
		}
	case 'd':
		t.setCursor(b.x, x.or1(0)-1)
	case 'e':
		t.moveCursor(0, x.or1(0))
	case 'g':
		switch x.get(0) {
		case 0:
			if b.x < len(b.tabs) {
				b.tabs[b.x] = false
			}
		case 3:
			b.tabs = make([]bool, t.cols)
		}
	case 'h', 'l':
		for _, m := range x.main {
			switch m {
			case 4:
				t.modes.insert = cmd.Final() == 'h'
			case 20:
				t.modes.convertEol = cmd.Final() == 'h'
			}
		}
	case 'm':
		t.sgr(x)
	case 'n':
		switch x.get(0) {
		case 5:
			t.reply("\x1b[0n")
		case 6:
			t.reply("\x1b[%d;%dR", b.y+1, b.x+1)
		}
	case 'r':
		top := x.or1(0)
		bottom := t.rows
		if len(x.main) >= 2 && x.main[1] <= t.rows && x.main[1] != 0 {
			bottom = x.main[1]
		}
		if bottom > top {
			b.top, b.bottom = top-1, bottom-1
			t.setCursor(0, 0)
		}
	case 's':
		t.saveCursor()
	case 'u':
		t.restoreCursor()
	case 't':
		// window operations are off by default in xterm.js: no reply
	}
}

func (t *term) csiPrivate(cmd ansi.Cmd, x *xparams) {
	switch {
	case cmd.Intermediate() == '$' && cmd.Final() == 'p':
		t.requestMode(x.get(0), false)
	case cmd.Intermediate() != 0:
	case cmd.Final() == 'h' || cmd.Final() == 'l':
		for _, m := range x.main {
			t.setPrivateMode(m, cmd.Final() == 'h')
		}
	case cmd.Final() == 'J': // DECSED
		t.eraseInDisplay(x.get(0), true)
	case cmd.Final() == 'K': // DECSEL
		t.eraseInLine(x.get(0), true)
	case cmd.Final() == 'n':
		if x.get(0) == 6 {
			t.reply("\x1b[?%d;%dR", t.buf.y+1, t.buf.x+1)
		}
	}
}

func (t *term) setPrivateMode(m int, set bool) {
	switch m {
	case 1:
		t.modes.appCursor = set
	case 2:
		if set {
			t.charsets = [4]byte{}
			t.cs = 0
		}
	case 6:
		t.modes.origin = set
		t.setCursor(0, 0)
	case 7:
		t.modes.wraparound = set
	case 12:
		t.blinkOption = set
	case 45:
		t.modes.reverseWrap = set
	case 66:
		t.modes.appKeypad = set
	case 9, 1000, 1002, 1003:
		t.modes.mouse = mouseNone
		if set {
			switch m {
			case 9:
				t.modes.mouse = mouseX10
			case 1000:
				t.modes.mouse = mouseVT200
			case 1002:
				t.modes.mouse = mouseDrag
			default:
				t.modes.mouse = mouseAny
			}
		}
	case 1004:
		t.modes.sendFocus = set
	case 1006:
		t.modes.mouseEnc = encDefault
		if set {
			t.modes.mouseEnc = encSGR
		}
	case 1016:
		t.modes.mouseEnc = encDefault
		if set {
			t.modes.mouseEnc = encSGRPixels
		}
	case 25:
		t.hidden = !set
	case 1048:
		if set {
			t.saveCursor()
		} else {
			t.restoreCursor()
		}
	case 1049, 47, 1047:
		if set {
			if m == 1049 {
				t.saveCursor()
			}
			t.activateAlt()
		} else {
			t.activateNormal()
			if m == 1049 {
				t.restoreCursor()
			}
		}
	case 2004:
		t.modes.bracketedPaste = set
	case 2026:
		t.modes.syncOutput = set
	}
}

// requestMode answers DECRQM as xterm.js does.
func (t *term) requestMode(p int, ansiMode bool) {
	const notRecognized, set, reset, permSet, permReset = 0, 1, 2, 3, 4
	b2v := func(v bool) int {
		if v {
			return set
		}
		return reset
	}
	v := notRecognized
	m := t.modes
	if ansiMode {
		switch p {
		case 2:
			v = permReset
		case 4:
			v = b2v(m.insert)
		case 12:
			v = permSet
		case 20:
			v = b2v(m.convertEol)
		}
		t.reply("\x1b[%d;%d$y", p, v)
		return
	}
	switch p {
	case 1:
		v = b2v(m.appCursor)
	case 6:
		v = b2v(m.origin)
	case 7:
		v = b2v(m.wraparound)
	case 8:
		v = permSet
	case 9:
		v = b2v(m.mouse == mouseX10)
	case 12:
		v = b2v(t.blinkOption)
	case 25:
		v = b2v(!t.hidden)
	case 45:
		v = b2v(m.reverseWrap)
	case 66:
		v = b2v(m.appKeypad)
	case 67, 1005, 1015:
		v = permReset
	case 1000:
		v = b2v(m.mouse == mouseVT200)
	case 1002:
		v = b2v(m.mouse == mouseDrag)
	case 1003:
		v = b2v(m.mouse == mouseAny)
	case 1004:
		v = b2v(m.sendFocus)
	case 1006:
		v = b2v(m.mouseEnc == encSGR)
	case 1016:
		v = b2v(m.mouseEnc == encSGRPixels)
	case 1048:
		v = set
	case 47, 1047, 1049:
		v = b2v(t.altActive())
	case 2004:
		v = b2v(m.bracketedPaste)
	case 2026:
		v = b2v(m.syncOutput)
	}
	t.reply("\x1b[?%d;%d$y", p, v)
}

// eraseInDisplay is ED, or DECSED when selective: cells a DECSCA
// protected stay.
func (t *term) eraseInDisplay(p int, selective bool) {
	t.restrictCursor(t.cols)
	b := t.buf
	switch p {
	case 0:
		t.eraseInRow(b.y, b.x, t.cols, b.x == 0, selective)
		for y := b.y + 1; y < t.rows; y++ {
			t.resetRow(y, selective)
		}
	case 1:
		t.eraseInRow(b.y, 0, b.x+1, true, selective)
		if b.x+1 >= t.cols && b.y+1 < b.n {
			// xterm.js unwraps line y+1 counted from the oldest line, not
			// the screen row below (InputHandler.eraseInDisplay): the same
			b.at(b.y + 1).wrapped = false
		}
		for y := b.y - 1; y >= 0; y-- {
			t.resetRow(y, selective)
		}
	case 2:
		for y := t.rows - 1; y >= 0; y-- {
			t.resetRow(y, selective)
		}
	case 3:
		b.trimHistory()
	}
}

// protected reports whether a DECSCA protected c.
func (t *term) protected(c cell) bool { return t.styles.pens[c.style].flags&flagProtected != 0 }

func (t *term) eraseInRow(y, start, end int, clearWrap, selective bool) {
	l := t.buf.row(y)
	if selective {
		l.replaceUnprotected(start, end, t.eraseCell(), t.protected)
	} else {
		l.replaceCells(start, end, t.eraseCell())
	}
	if clearWrap {
		l.wrapped = false
	}
}

func (t *term) resetRow(y int, selective bool) {
	l := t.buf.row(y)
	if selective {
		fill := t.eraseCell()
		for x := range l.cells {
			if !t.protected(l.cells[x]) {
				l.set(x, fill)
			}
		}
	} else {
		l.fill(t.eraseCell())
	}
	l.wrapped = false
}

// eraseInLine is EL, or DECSEL when selective.
func (t *term) eraseInLine(p int, selective bool) {
	t.restrictCursor(t.cols)
	b := t.buf
	switch p {
	case 0:
		t.eraseInRow(b.y, b.x, t.cols, b.x == 0, selective)
	case 1:
		t.eraseInRow(b.y, 0, b.x+1, false, selective)
	case 2:
		t.eraseInRow(b.y, 0, t.cols, true, selective)
	}
}

// insertLines is IL (insert) and DL (delete).
func (t *term) insertLines(n int, insert bool) {
	t.restrictCursor(t.cols - 1)
	b := t.buf
	if b.y > b.bottom || b.y < b.top {
		return
	}
	for range min(n, b.bottom-b.y+1) { // past the lines below the cursor every line is a new one
		b.rotate(b.y, b.bottom, !insert).reset(b.cols, t.eraseCell())
	}
	b.x = 0
}

// scrollLeft is SL (left) and SR.
func (t *term) scrollLeft(n int, right bool) {
	b := t.buf
	if b.y > b.bottom || b.y < b.top {
		return
	}
	for y := b.top; y <= b.bottom; y++ {
		l := b.row(y)
		if right {
			l.insertCells(0, n, t.eraseCell())
		} else {
			l.deleteCells(0, n, t.eraseCell())
		}
		l.wrapped = false
	}
}

// columns is DECIC (insert) and DECDC.
func (t *term) columns(n int, insert bool) {
	b := t.buf
	if b.y > b.bottom || b.y < b.top {
		return
	}
	for y := b.top; y <= b.bottom; y++ {
		l := b.row(y)
		if insert {
			l.insertCells(b.x, n, t.eraseCell())
		} else {
			l.deleteCells(b.x, n, t.eraseCell())
		}
		l.wrapped = false
	}
}

// repeatPreceding is REP as xterm.js runs it: the text of the one cell the
// last printed character took (prec columns back from the cursor) printed n
// more times, from the join state that character left; nothing when the
// last thing parsed was not a print (prec 0) or the cell is off the line.
// Like any CSI it leaves no character to join.
func (t *term) repeatPreceding(n, prec int) {
	b := t.buf
	x := b.x - prec
	if prec == 0 || x < 0 || x >= t.cols {
		return
	}
	text := []rune(b.row(b.y).text(x))
	t.precW = prec
	if !t.modes.wraparound && n > 2*t.cols {
		// the cursor stops at the last column, which the rest write again:
		// a wide character there alternates between two states
		n = 2*t.cols + n%2
	}
	for i := range n {
		for j, r := range text {
			t.inPrint = i > 0 || j > 0
			t.printRune(r)
		}
	}
	t.inPrint = false
	t.precW = 0
}

func (t *term) setCursorStyle(p int) {
	if p == 0 {
		t.modes.cursorStyle, t.modes.cursorBlink = 0, 0
		return
	}
	switch p {
	case 1, 2:
		t.modes.cursorStyle = 1
	case 3, 4:
		t.modes.cursorStyle = 2
	case 5, 6:
		t.modes.cursorStyle = 3
	}
	t.modes.cursorBlink = 2 - p%2
}

func (t *term) softReset() {
	t.hidden = false
	b := t.buf
	b.top, b.bottom = 0, t.rows-1
	t.pen = pen{}
	// xterm.js's soft reset resets its core modes; mouse tracking is its
	// mouse service's and LNM its convertEol option: both are kept
	m := defaultModes()
	m.mouse, m.mouseEnc, m.convertEol = t.modes.mouse, t.modes.mouseEnc, t.modes.convertEol
	t.modes = m
	t.charsets, t.gl, t.cs = [4]byte{}, 0, 0
	b.savedX, b.savedY = 0, b.ybase()
	b.savedPen = pen{}
	b.savedCS = 0
}

func (t *term) esc(cmd ansi.Cmd) {
	t.precW = 0
	if t.stream.inters > 1 {
		return // ESC * + A designates nothing in xterm.js (x/ansi kept the last intermediate)
	}
	inter, final := cmd.Intermediate(), cmd.Final()
	switch inter {
	case 0:
		switch final {
		case '7':
			t.saveCursor()
		case '8':
			t.restoreCursor()
		case 'D':
			t.index()
		case 'E':
			t.buf.x = 0
			t.index()
		case 'H':
			t.tabSet()
		case 'M':
			t.reverseIndex()
		case '=':
			t.modes.appKeypad = true
		case '>':
			t.modes.appKeypad = false
		case 'c':
			t.fullReset()
		case 'n', '}':
			t.setGLevel(2)
		case 'o', '|':
			t.setGLevel(3)
		case '~':
			t.setGLevel(1)
		}
	case '%':
		if final == '@' || final == 'G' {
			t.setGLevel(0)
			t.setCharset(0, 0)
		}
	case '(', ')', '*', '+', '-', '.':
		g := strings.IndexByte("()*+", inter)
		if g < 0 {
			g = strings.IndexByte("?-.", inter) // G1–G2 of the 96-character sets
		}
		cs := final
		if _, ok := xtermCharsets[cs]; !ok {
			if cs != 'B' {
				return // a set xterm.js does not know has no handler: the designation stays
			}
			cs = 0 // ASCII
		}
		t.setCharset(g, cs)
	case '#':
		if final == '8' {
			t.alignmentPattern()
		}
	}
}

// alignmentPattern is DECALN as xterm.js has it: every row of the screen
// filled with E in the pen's colours and flags, but none of its extended
// attributes (xterm.js copies fg and bg into a fresh cell: no hyperlink,
// no underline style or colour).
func (t *term) alignmentPattern() {
	p := t.pen // its extended attributes go before cellPen reads them: the cell's are fresh
	p.ul, p.ulColor, p.link = 0, 0, 0
	p = cellPen(p)
	c := cell{r: 'E', width: 1, style: t.styleOf(normalPen(p))}
	t.setCursor(0, 0)
	b := t.buf
	for y := 0; y < t.rows; y++ {
		// rows from the cursor (the region's top under origin mode) on, as
		// many as the screen has: past the last line, xterm.js's circular
		// list of lines finds nothing while it has room, and wraps to its
		// oldest lines once full, as the alternate screen always is
		i := b.ybase() + b.y + y
		if i >= b.n && b.n < b.max {
			continue
		}
		l := b.at(i % b.n)
		l.fill(c)
		l.wrapped = false
	}
	t.setCursor(0, 0)
}

// oscHandlers are the OSC strings the model acts on, by identifier: those
// xterm.js acts on in a way a viewer sees or a program can ask about.
var oscHandlers = map[int]func(t *term, id int, arg string){
	0:   func(t *term, _ int, arg string) { t.title, t.icon = arg, arg },
	1:   func(t *term, _ int, arg string) { t.icon = arg },
	2:   func(t *term, _ int, arg string) { t.title = arg },
	4:   func(t *term, _ int, arg string) { t.setColors(arg) },
	8:   func(t *term, _ int, arg string) { t.setHyperlink(arg) },
	10:  (*term).specialColors,
	11:  (*term).specialColors,
	12:  (*term).specialColors,
	104: func(t *term, _ int, arg string) { t.restoreColors(arg) },
	110: forgetColor,
	111: forgetColor,
	112: forgetColor,
}

// forgetColor is OSC 110, 111 and 112: the default foreground, background or
// cursor colour back to the viewer's theme.
func forgetColor(t *term, id int, _ string) { delete(t.palette, colorFG+id-110) }

// osc runs at an OSC string's end. x/ansi's identifier and data are not
// used: the string is read as xterm.js reads it (streamState.osc, osc.go).
func (t *term) osc(int, []byte) {
	t.precW = 0
	if id, data, ok := t.stream.osc.end(); ok {
		oscHandlers[id](t, id, string(data))
	}
}

// dcs runs at a DCS string's end. The one xterm.js acts on is DECRQSS
// (DCS $ q Pt ST), which it answers as its requestStatusString does: the
// protection attribute, a conformance level it does not have, the scroll
// region, an SGR it does not report ("0m"), and the cursor style its options
// give (DECSCUSR does not change them; mode 12 changes the blink). Anything
// else is "not valid". A payload over xterm.js's limit gets no answer.
func (t *term) dcs(cmd ansi.Cmd, _ ansi.Params, _ []byte) {
	t.precW = 0
	s := t.stream
	if cmd.Prefix() != 0 || cmd.Intermediate() != '$' || s.inters > 1 || cmd.Final() != 'q' || s.dcsUnits > oscPayloadLimit {
		return
	}
	req := ""
	if s.dcsN <= len(s.dcsHead) {
		req = string(s.dcsHead[:s.dcsN])
	}
	switch req {
	case `"q`:
		p := 0
		if t.pen.flags&flagProtected != 0 {
			p = 1
		}
		t.reply("\x1bP1$r%d\"q\x1b\\", p)
	case `"p`:
		t.reply("\x1bP1$r61;1\"p\x1b\\")
	case "r":
		t.reply("\x1bP1$r%d;%dr\x1b\\", t.buf.top+1, t.buf.bottom+1)
	case "m":
		t.reply("\x1bP1$r0m\x1b\\")
	case " q":
		style := 2 // the viewer's cursorStyle option, "block"
		if t.blinkOption {
			style--
		}
		t.reply("\x1bP1$r%d q\x1b\\", style)
	default:
		t.reply("\x1bP0$r\x1b\\")
	}
}

func (t *term) setHyperlink(arg string) {
	params, uri, ok := strings.Cut(arg, ";")
	if !ok {
		return
	}
	if uri == "" && strings.TrimSpace(params) != "" {
		return
	}
	defer t.updateExtended()
	if uri == "" {
		t.pen.link = 0
		return
	}
	ref := linkRef{params: strings.TrimSpace(params), url: uri}
	id, ok := uint16(0), false
	key := linkKey(ref)
	if key != (linkRef{}) {
		id, ok = t.linkIndex[key]
	}
	if !ok {
		if len(t.links) >= maxStyles {
			t.compactLinks()
		}
		if len(t.links) >= maxStyles {
			t.pen.link = 0
			return
		}
		id = uint16(len(t.links))
		t.links = append(t.links, ref)
		if key != (linkRef{}) {
			t.linkIndex[key] = id
		}
	}
	t.pen.link = id
}
