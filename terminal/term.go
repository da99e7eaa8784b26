package terminal

import (
	"bytes"
	"io"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
	"github.com/charmbracelet/x/vt"
)

// HistoryLines is how many lines scrolled off the top the emulator keeps.
const HistoryLines = 1000

// replyQueue bounds the terminal query replies kept for a reader. Replies
// past it are dropped: a program that floods queries nobody answers must not
// grow memory or stall the emulator.
const replyQueue = 64

// cursorState is the part of a cursor that x/vt saves with DECSC and that a
// redraw must restore; x/vt keeps the pen, link and saved copy private.
type cursorState struct {
	pos    uv.Position
	pen    uv.Style
	link   uv.Link
	hidden bool
	style  vt.CursorStyle
	steady bool
}

// screenState is what this package tracks for one of x/vt's two screens.
type screenState struct {
	pen    uv.Style
	link   uv.Link
	saved  cursorState
	top    int // scroll region, first row
	bottom int // scroll region, one past the last row
}

// term wraps an x/vt emulator with the state x/vt keeps private (title,
// pen, link, scroll region, saved cursor, modes, the main screen behind the
// alternate one), tracked by handlers that observe and let the built-in run.
//
// Every field is owned by one goroutine (the Emulator's), except replies,
// which the drain goroutine sends on.
type term struct {
	vt     *vt.Emulator
	stream *streamState
	// scratch holds rewritten bytes on their way into vt.
	scratch []byte
	// oscFixes are offsets of placeholders in the OSC being dispatched.
	oscFixes []int

	title, icon string
	// charsets are the G0–G3 designations ('B' ASCII, '0' DEC special
	// graphics, 'A' UK) and gl the set invoked into GL (SO, SI, LS2, LS3).
	charsets [4]byte
	gl       int
	modes    ansi.Modes
	scr      [2]screenState
	// main is the main screen as it was when the alternate one was entered,
	// and mainCur its cursor; nil while the main screen is active.
	main    *uv.Buffer
	mainCur cursorState
	// altVia is the mode (1047 or 1049) that entered the alternate screen.
	altVia int
	// fed counts bytes written, the offset a redraw describes.
	fed int64

	replies chan []byte
	drained chan struct{}
}

// newTerm builds the emulator and starts the goroutine that drains query
// replies; close waits for it.
func newTerm(w, h int) *term {
	t := &term{
		vt:      vt.NewEmulator(w, h),
		stream:  newStreamState(),
		modes:   defaultModes(),
		replies: make(chan []byte, replyQueue),
		drained: make(chan struct{}),
	}
	t.vt.SetScrollbackSize(HistoryLines)
	t.resetScreens(h)
	t.vt.SetCallbacks(vt.Callbacks{
		EnableMode:  func(m ansi.Mode) { t.modes[m] = ansi.ModeSet },
		DisableMode: func(m ansi.Mode) { t.modes[m] = ansi.ModeReset },
	})
	t.observe()
	go t.drain()
	return t
}

// defaultModes is the mode table x/vt starts with (vt.resetModes).
func defaultModes() ansi.Modes {
	m := ansi.Modes{}
	for _, d := range []int{1, 6, 9, 20, 66, 69, 1000, 1001, 1002, 1003, 1004, 1006, 1047, 1048, 1049, 2004} {
		m[ansi.DECMode(d)] = ansi.ModeReset
	}
	m[ansi.DECMode(7)] = ansi.ModeSet
	m[ansi.DECMode(25)] = ansi.ModeSet
	return m
}

func (t *term) resetScreens(h int) {
	t.charsets, t.gl = [4]byte{'B', 'B', 'B', 'B'}, 0
	for i := range t.scr {
		t.scr[i] = screenState{bottom: h}
	}
}

// drain reads query replies (DA, DSR, ...) as x/vt writes them. x/vt writes
// them into an unbuffered pipe from inside Write, so without a reader the
// emulator deadlocks. Replies go to a bounded queue and are dropped when it
// is full.
func (t *term) drain() {
	defer close(t.drained)
	defer close(t.replies)
	buf := make([]byte, 4096)
	for {
		n, err := t.vt.Read(buf)
		if n > 0 {
			select {
			case t.replies <- bytes.Clone(buf[:n]):
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

// close ends the drain goroutine and waits for it. It closes the pipe rather
// than calling vt.Close, which writes a flag the drain goroutine reads.
func (t *term) close() {
	if pw, ok := t.vt.InputPipe().(*io.PipeWriter); ok {
		_ = pw.Close()
	}
	<-t.drained
}

// cur is the index of the active screen in scr.
func (t *term) cur() int {
	if t.vt.IsAltScreen() {
		return 1
	}
	return 0
}

// write feeds p to the emulator. Bytes are rewritten where a 0x9C would end
// a control string early; a write is split after each OSC that had such a
// byte, so its handlers can put the byte back.
func (t *term) write(p []byte) {
	t.fed += int64(len(p))
	t.scratch = t.scratch[:0]
	for _, b := range p {
		before := t.stream.p.State()
		out, action, keep := t.stream.advance(b)
		if !keep {
			continue
		}
		if action == parser.ExecuteAction && (b == ansi.SO || b == ansi.SI) {
			t.gl = int(ansi.SI - b) // SO (0x0E) invokes G1, SI (0x0F) G0
		}
		t.scratch = append(t.scratch, out)
		if before == parser.OscStringState && t.stream.p.State() != parser.OscStringState && len(t.stream.fixes) > 0 {
			t.oscFixes = t.stream.fixes
			_, _ = t.vt.Write(t.scratch)
			t.scratch, t.oscFixes = t.scratch[:0], nil
		}
	}
	if len(t.scratch) > 0 {
		_, _ = t.vt.Write(t.scratch)
	}
}

// resize changes both screens, as x/vt does, and the saved main screen.
func (t *term) resize(w, h int) {
	if w < 1 || h < 1 {
		return
	}
	t.vt.Resize(w, h)
	for i := range t.scr {
		t.scr[i].top, t.scr[i].bottom = 0, h
	}
	if t.main != nil {
		t.main.Resize(w, h)
	}
}

// line copies row y of the active screen.
func (t *term) line(y int) uv.Line {
	w := t.vt.Width()
	l := make(uv.Line, w)
	for x := 0; x < w; x++ {
		if c := t.vt.CellAt(x, y); c != nil {
			l[x] = *c
		}
	}
	return l
}

// cursor reads the active screen's cursor with the tracked pen and link.
func (t *term) cursor() cursorState {
	s := &t.scr[t.cur()]
	style, blink := t.vt.CursorStyle()
	return cursorState{
		pos: t.vt.CursorPosition(), pen: s.pen, link: s.link,
		hidden: t.vt.CursorHidden(), style: style, steady: !blink,
	}
}

// history renders the scrollback, oldest first, one line per CRLF.
func (t *term) history() []byte {
	var b bytes.Buffer
	for _, l := range t.vt.Scrollback().Lines() {
		b.WriteString(l.Render())
		b.WriteString("\r\n")
	}
	return b.Bytes()
}
