package terminal

import (
	"bytes"
	"errors"
	"sync"
)

// ErrClosed is returned by an Emulator or Session used after Close or Stop.
var ErrClosed = errors.New("terminal: closed")

// Snapshot is what a viewer that attaches needs, taken at one point of the
// stream: Offset is the number of output bytes the screen reflects, so a
// caller that also holds batches knows which ones follow it.
type Snapshot struct {
	Offset     int64
	Cols, Rows int
	Title      string
	// History is the scrollback, oldest first, each line rendered with its
	// styles and ended by CRLF.
	History []byte
	// Redraw reproduces the screen on a terminal of the same size.
	Redraw []byte
}

// Attach is the payload for a fresh viewer: history pushed into its
// scrollback, then the redraw. After the history it scrolls Rows-1 more
// lines so that every history line leaves the visible screen.
func (s Snapshot) Attach() []byte {
	var b bytes.Buffer
	if len(s.History) > 0 {
		b.WriteString("\x1b[?1049l\x1b[0m\x1b[H")
		b.Write(s.History)
		b.Write(bytes.Repeat([]byte("\r\n"), max(s.Rows-1, 0)))
	}
	b.Write(s.Redraw)
	return b.Bytes()
}

// Emulator is a terminal emulator owned by one goroutine: x/vt is not safe
// for concurrent use, and a redraw must see the screen between two writes.
// Every method hands its work to that goroutine and waits for it.
type Emulator struct {
	work    chan func(*term) // to the owning goroutine
	quit    chan struct{}    // closed by Close
	done    chan struct{}    // closed when the owning goroutine has ended
	replies <-chan []byte    // static after construction
	once    sync.Once
}

// NewEmulator starts an emulator of cols×rows with about HistoryLines of
// scrollback. Close it to end its goroutines.
func NewEmulator(cols, rows int) *Emulator {
	t := newTerm(max(cols, 1), max(rows, 1))
	e := &Emulator{
		work:    make(chan func(*term)),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		replies: t.replies,
	}
	go e.run(t)
	return e
}

func (e *Emulator) run(t *term) {
	defer close(e.done)
	for {
		select {
		case f := <-e.work:
			f(t)
		case <-e.quit:
			t.close()
			return
		}
	}
}

// do runs f on the owning goroutine and waits for it.
func (e *Emulator) do(f func(*term)) error {
	ran := make(chan struct{})
	select {
	case e.work <- func(t *term) { f(t); close(ran) }:
	case <-e.done:
		return ErrClosed
	}
	<-ran
	return nil
}

// Write feeds output bytes to the emulator. It never blocks on query
// replies: they are drained into Replies.
func (e *Emulator) Write(p []byte) (int, error) {
	if err := e.do(func(t *term) { t.write(p) }); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Resize changes the emulator's size; the program's PTY is the caller's.
func (e *Emulator) Resize(cols, rows int) error {
	return e.do(func(t *term) { t.resize(cols, rows) })
}

// Snapshot takes history and redraw at the same point of the stream.
func (e *Emulator) Snapshot() (Snapshot, error) {
	var s Snapshot
	err := e.do(func(t *term) {
		s = Snapshot{
			Offset: t.fed, Cols: t.vt.Width(), Rows: t.vt.Height(), Title: t.title,
			History: t.history(), Redraw: t.redraw(),
		}
	})
	return s, err
}

// Replies carries the emulator's answers to terminal queries (DA, DSR, ...)
// for a caller that wants to write them to the program. The queue is
// bounded and drops when full; it is closed after Close.
func (e *Emulator) Replies() <-chan []byte {
	return e.replies
}

// Close ends the emulator's goroutines and waits for them.
func (e *Emulator) Close() error {
	e.once.Do(func() { close(e.quit) })
	<-e.done
	return nil
}
