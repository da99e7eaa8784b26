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
	// styles and ended by CRLF, or by a wrap into the next where the
	// program's output wrapped it (so that a viewer reflows it on a resize
	// as the emulator does); the last one always by CRLF.
	History []byte
	// Redraw reproduces the screen on a terminal of the same size.
	Redraw []byte
	// Tail is the output after Offset that the emulator had not taken yet
	// (at most MaxLag), as the batches it was fed: send it after the
	// redraw as ordinary output, paced like any other.
	Tail []Batch
	// resume is the end of Redraw that puts a viewer inside the sequence
	// the emulator is reading, if any (Bound keeps it).
	resume []byte
}

// OversizeNotice is what Bound puts in place of a redraw too large to
// send: a reset, and a line saying why the screen is not shown.
const OversizeNotice = "\x1bc\x1b[1mTabbridge: this screen is not shown: its links or title make it too large, " +
	"as only a program trying to overwhelm its viewers writes. What the program writes next is shown.\x1b[0m\r\n"

// Bound keeps the snapshot's History and Redraw within max bytes together
// and says what it left out: "" (nothing), "history", or "screen". The
// program decides how large they are (a link target or a title may be 10
// million characters, and every cell can hold another link), and a
// snapshot is sent in one message whose size the server bounds. The
// history goes first (a fresh viewer gets no scrollback); a redraw still
// over max becomes OversizeNotice, ended as the redraw was ended, inside
// the sequence being read (an OSC whose payload so far does not fit is
// resumed as one that aborts, so the viewer swallows its rest), so that
// the output after the snapshot reads on as it does in the emulator.
func (s *Snapshot) Bound(max int) string {
	if len(s.History)+len(s.Redraw) <= max {
		return ""
	}
	s.History = nil
	if len(s.Redraw) <= max {
		return "history"
	}
	resume := s.resume
	if len(OversizeNotice)+len(resume) > max {
		resume = []byte("\x1b]x") // only an OSC payload makes resume long
	}
	s.Redraw = append([]byte(OversizeNotice), resume...)
	return "screen"
}

// Attach is the payload for a fresh viewer: history pushed into its
// scrollback, then the redraw, then the tail. After the history it scrolls
// Rows-1 more lines so that every history line leaves the visible screen.
func (s Snapshot) Attach() []byte {
	var b []byte
	if len(s.History) > 0 {
		b = append(b, "\x1b[?1049l\x1b[0m\x1b[H"...)
		b = append(b, s.History...)
		b = append(b, bytes.Repeat([]byte("\r\n"), max(s.Rows-1, 0))...)
	}
	return s.appendScreen(b)
}

// Screen is the redraw followed by the tail: the screen as it stands once
// the emulator has taken everything it was fed. A snapshot does not make
// the emulator catch up, so its Redraw alone can be behind the output
// already delivered.
func (s Snapshot) Screen() []byte { return s.appendScreen(nil) }

func (s Snapshot) appendScreen(b []byte) []byte {
	b = append(b, s.Redraw...)
	for _, t := range s.Tail {
		b = append(b, t.Data...)
	}
	return b
}

// MaxLag is how far, in bytes, the emulator may fall behind the output
// already handed to viewers (Feed) before Feed waits for it: a burst is
// sent on at PTY speed while the emulator catches up, and a snapshot taken
// meanwhile carries the bytes the emulator has not taken yet.
const MaxLag = 1 << 20

// feedChunk bounds the bytes the owning goroutine feeds between two other
// calls, so a snapshot or resize waits for at most about this much work.
const feedChunk = 32 << 10

// Emulator is a terminal emulator owned by one goroutine: the screen model is not safe
// for concurrent use, and a redraw must see the screen between two writes.
// Every method hands its work to that goroutine and waits for it, except
// Feed, which queues output for it.
type Emulator struct {
	work    chan func(*term) // to the owning goroutine
	quit    chan struct{}    // closed by Close
	done    chan struct{}    // closed when the owning goroutine has ended
	replies <-chan []byte    // static after construction
	once    sync.Once

	feedMu   sync.Mutex
	room     *sync.Cond    // on feedMu: the lag fell below MaxLag, or closed
	lag      [][]byte      // fed, not yet written to the emulator, oldest first
	lagBytes int           // bytes in lag
	closed   bool          // Close was called
	feedWake chan struct{} // capacity 1: lag has bytes
	maxLag   int           // static
}

// NewEmulator starts an emulator of cols×rows with about HistoryLines of
// scrollback. Close it to end its goroutines.
func NewEmulator(cols, rows int) *Emulator {
	t := newTerm(max(cols, minCols), max(rows, 1))
	e := &Emulator{
		work:     make(chan func(*term)),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		replies:  t.replies,
		feedWake: make(chan struct{}, 1),
		maxLag:   MaxLag,
	}
	e.room = sync.NewCond(&e.feedMu)
	go e.run(t)
	return e
}

func (e *Emulator) run(t *term) {
	defer close(e.done)
	for {
		select {
		case f := <-e.work:
			f(t)
		case <-e.feedWake:
			if e.feedSome(t) {
				e.wakeFeed()
			}
		case <-e.quit:
			t.close()
			return
		}
	}
}

func (e *Emulator) wakeFeed() {
	select {
	case e.feedWake <- struct{}{}:
	default:
	}
}

// Feed queues output bytes (copied) for the emulator and returns at once,
// unless the emulator is MaxLag behind: it then waits for room, which is
// what slows a program that outruns its emulator.
func (e *Emulator) Feed(p []byte) error {
	return e.feed(bytes.Clone(p))
}

// feed queues p, which the caller hands over: nobody writes to it again.
func (e *Emulator) feed(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	e.feedMu.Lock()
	for e.lagBytes >= e.maxLag && !e.closed {
		e.room.Wait()
	}
	if e.closed {
		e.feedMu.Unlock()
		return ErrClosed
	}
	e.lag = append(e.lag, p)
	e.lagBytes += len(p)
	e.feedMu.Unlock()
	e.wakeFeed()
	return nil
}

// feedSome writes about feedChunk bytes of the lag and reports whether more
// is left. Only the owning goroutine writes, so a chunk taken off the lag
// is written before any snapshot runs.
func (e *Emulator) feedSome(t *term) bool {
	e.feedMu.Lock()
	n, size := 0, 0
	for n < len(e.lag) && (n == 0 || size+len(e.lag[n]) <= feedChunk) {
		size += len(e.lag[n])
		n++
	}
	chunks := e.lag[:n:n]
	e.lag = e.lag[n:]
	e.feedMu.Unlock()
	for _, c := range chunks {
		t.write(c)
	}
	e.feedMu.Lock()
	e.lagBytes -= size
	more := len(e.lag) > 0
	if len(e.lag) == 0 {
		e.lag = nil
	}
	e.room.Broadcast()
	e.feedMu.Unlock()
	return more
}

// catchUp writes the whole lag, for calls that must see every byte fed.
func (e *Emulator) catchUp(t *term) {
	for e.feedSome(t) {
	}
}

// pendingLag returns the chunks fed and not yet written, from offset on.
func (e *Emulator) pendingLag(offset int64) []Batch {
	e.feedMu.Lock()
	defer e.feedMu.Unlock()
	tail := make([]Batch, len(e.lag))
	for i, c := range e.lag {
		tail[i] = Batch{Offset: offset, Data: c}
		offset += int64(len(c))
	}
	return tail
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

// Write feeds output bytes to the emulator after any fed before them, and
// returns once it has taken them. It never blocks on query replies: they
// are drained into Replies.
func (e *Emulator) Write(p []byte) (int, error) {
	if err := e.do(func(t *term) { e.catchUp(t); t.write(p) }); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Resize changes the emulator's size; the program's PTY is the caller's.
func (e *Emulator) Resize(cols, rows int) error {
	return e.do(func(t *term) { e.catchUp(t); t.resize(cols, rows) })
}

// Snapshot takes history and redraw at the same point of the stream, the
// emulator's, with the bytes fed after it that it has not taken yet as
// Tail: everything fed is in the snapshot, and the emulator is not made to
// catch up first.
func (e *Emulator) Snapshot() (Snapshot, error) {
	var s Snapshot
	err := e.do(func(t *term) {
		s = Snapshot{
			Offset: t.fed, Cols: t.cols, Rows: t.rows, Title: t.title,
			History: t.history(), Redraw: t.redraw(), Tail: e.pendingLag(t.fed),
			resume: t.stream.resume(nil),
		}
	})
	return s, err
}

// End is the offset after the snapshot's tail: every byte before it is in
// the snapshot.
func (s Snapshot) End() int64 {
	if len(s.Tail) == 0 {
		return s.Offset
	}
	last := s.Tail[len(s.Tail)-1]
	return last.Offset + int64(len(last.Data))
}

// Replies carries the emulator's answers to terminal queries (DA, DSR, ...)
// for a caller that wants to write them to the program. The queue is
// bounded and drops when full; it is closed after Close.
func (e *Emulator) Replies() <-chan []byte {
	return e.replies
}

// Close ends the emulator's goroutines and waits for them.
func (e *Emulator) Close() error {
	e.once.Do(func() {
		e.feedMu.Lock()
		e.closed = true
		e.room.Broadcast()
		e.feedMu.Unlock()
		close(e.quit)
	})
	<-e.done
	return nil
}
