package daemon

import (
	"errors"
	"sync"
	"time"

	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/terminal"
)

// entry is one session and its state on the current link.
type entry struct {
	d     *Daemon // static
	index uint32  // static: the session's index on the wire

	mu   sync.Mutex // guards everything below
	info wire.SessionInfo
	sess *terminal.Session
	// online is true while a link is up and has announced this session;
	// output is queued only then.
	online   bool
	announce bool // the server has not been told of this session yet
	// resync asks for a snapshot in place of discarded output: batches
	// before the snapshot's offset are then skipped. redraw asks for one
	// without discarding anything (the server asked, or the size changed).
	resync, redraw bool
	skip           int64 // batches starting before it are covered by a snapshot
	queue          []terminal.Batch
	queueBytes     int64
	exitPending    bool // the exit status is still to be sent
	inputRefused   bool // the last input was refused: the program is not reading
	// refused counts the input bytes refused since the server was last
	// told, so that a person typing into a program that reads nothing is
	// told once per pass of the link's writer, not once per keystroke.
	refused int64
	done    chan struct{}
}

func newEntry(d *Daemon, index uint32, spec Spec) *entry {
	return &entry{d: d, index: index, done: make(chan struct{}), info: wire.SessionInfo{
		ID: newID(), Command: spec.Argv, Dir: spec.Dir, StartedAt: time.Now().UTC(),
		Cols: spec.Cols, Rows: spec.Rows,
	}}
}

func (e *entry) started(s *terminal.Session) {
	e.mu.Lock()
	e.sess = s
	e.mu.Unlock()
}

func (e *entry) session() *terminal.Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sess
}

// await records the exit status once every byte has been delivered; the
// link sends it after the session's queued output.
func (e *entry) await() {
	s := e.session()
	<-s.Done()
	code := s.ExitCode()
	e.mu.Lock()
	e.info.Exited, e.info.ExitCode = true, code
	e.exitPending = e.online
	e.mu.Unlock()
	close(e.done)
	e.d.prune()
	e.d.signal()
}

// exited reports whether the session's program has exited.
func (e *entry) exited() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info.Exited
}

// finished reports whether the session exited and its exit is no longer
// waiting to be sent.
func (e *entry) finished() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info.Exited && !e.exitPending
}

// output is the session's Output: it runs on the session's goroutine after
// the emulator took the batch, and must never block. Offline, or while a
// snapshot is due, the batch is already covered by the next snapshot.
func (e *entry) output(b terminal.Batch) {
	e.mu.Lock()
	switch {
	case !e.online || e.resync:
	case e.queueBytes+int64(len(b.Data)) > e.d.opts.Queue:
		e.queue, e.queueBytes, e.resync = nil, 0, true
	default:
		e.queue = append(e.queue, b)
		e.queueBytes += int64(len(b.Data))
	}
	e.mu.Unlock()
	e.d.signal()
}

// link marks the entry online on a new link: the server is told of it and
// gets a snapshot before any output.
func (e *entry) link(up bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.online, e.announce, e.resync, e.redraw = up, up, up, false
	e.queue, e.queueBytes, e.exitPending, e.refused = nil, 0, false, 0
}

// linkFrame is a frame for the link's writer; a pooled one's buffer goes back
// to outputBuffers once it is written.
type linkFrame struct {
	wire.Frame
	pooled bool
}

// takeFrames returns what the link should send next for this session, in
// order: the announcement, a due snapshot, queued output merged into
// frames, then the exit status.
func (e *entry) takeFrames() []linkFrame {
	e.mu.Lock()
	if e.sess == nil {
		// Not started yet: announced once its program runs (Start signals
		// then), so no input for it can arrive before there is a session to
		// take it, and a start that fails was never announced.
		e.mu.Unlock()
		return nil
	}
	var frames []linkFrame
	if e.announce {
		info := e.info
		frames = append(frames, linkFrame{Frame: wire.Control{Type: wire.TypeSession, Index: e.index, Session: &info}.Frame()})
		e.announce = false
	}
	snap := (e.resync || e.redraw) && e.sess != nil
	discard := e.resync
	e.resync, e.redraw = false, false
	sess := e.sess
	e.mu.Unlock()
	if snap {
		for i, f := range e.snapshot(sess, discard) {
			frames = append(frames, linkFrame{Frame: wire.Binary(f), pooled: i > 0}) // after the snapshot, its tail
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.outputFrames() {
		frames = append(frames, linkFrame{Frame: wire.Binary(f), pooled: true})
	}
	if e.refused > 0 {
		frames = append(frames, linkFrame{Frame: wire.Control{Type: wire.TypeRefused, Index: e.index, Bytes: e.refused}.Frame()})
		e.refused = 0
	}
	if e.exitPending && !e.resync && len(e.queue) == 0 {
		frames = append(frames, linkFrame{Frame: wire.Control{Type: wire.TypeExit, Index: e.index, ExitCode: e.info.ExitCode}.Frame()})
		e.exitPending = false
	}
	return frames
}

// snapshot takes the session's snapshot: the frame at the emulator's
// offset, then its tail (output the emulator had not taken yet) as output
// frames. Queued output the two cover is skipped; for a redraw that
// discards nothing, the tail repeats output viewers may have, which they
// ignore by offset.
func (e *entry) snapshot(s *terminal.Session, discard bool) [][]byte {
	snap, err := s.Snapshot()
	if err != nil {
		return nil
	}
	e.mu.Lock()
	e.skip = max(e.skip, snap.End())
	e.mu.Unlock()
	switch snap.Bound(wire.MaxSnapshot) {
	case "history":
		e.d.opts.Logger.Warn("snapshot too large: sent without its history", "session", e.info.ID)
	case "screen":
		e.d.opts.Logger.Warn("screen too large: sent as a notice that it is not shown", "session", e.info.ID)
	}
	ws := wire.Snapshot{
		Resync: discard, Session: e.index, Offset: snap.Offset, Cols: snap.Cols, Rows: snap.Rows,
		History: snap.History, Redraw: snap.Redraw,
	}
	frames := [][]byte{wire.AppendDaemonSnapshot(nil, ws)}
	return append(frames, e.batchFrames(snap.Tail)...)
}

// outputFrames merges queued batches into frames; callers hold e.mu.
func (e *entry) outputFrames() [][]byte {
	var fresh []terminal.Batch
	for _, b := range e.queue {
		if b.Offset >= e.skip {
			fresh = append(fresh, b)
		}
	}
	e.queue, e.queueBytes = nil, 0
	return e.batchFrames(fresh)
}

// batchFrames merges contiguous batches into output frames of at most
// maxOutputFrame (a larger batch is a frame of its own).
func (e *entry) batchFrames(batches []terminal.Batch) [][]byte {
	var frames [][]byte
	var cur []byte
	var end int64
	for i, b := range batches {
		if cur != nil && (b.Offset != end || len(cur)+len(b.Data) > maxOutputFrame) {
			frames, cur = append(frames, cur), nil
		}
		if cur == nil {
			cur = wire.AppendDaemonOutput(getFrame(13+frameSize(batches[i:])), wire.Output{Session: e.index, Offset: b.Offset})
		}
		cur = append(cur, b.Data...)
		end = b.Offset + int64(len(b.Data))
	}
	if cur != nil {
		frames = append(frames, cur)
	}
	return frames
}

// outputBuffers holds output frame buffers between the link's writes: the
// socket copies a frame as it sends it, so while output flows the link
// reuses a few buffers instead of allocating every frame.
var outputBuffers sync.Pool

// getFrame returns an empty buffer of at least size bytes.
func getFrame(size int) []byte {
	if size <= maxOutputFrame {
		if p, ok := outputBuffers.Get().(*[]byte); ok {
			return (*p)[:0]
		}
		return make([]byte, 0, maxOutputFrame)
	}
	return make([]byte, 0, size)
}

// putFrame hands back an output frame the link has written.
func putFrame(b []byte) {
	if cap(b) == maxOutputFrame {
		outputBuffers.Put(&b)
	}
}

// frameSize is the payload of the frame batchFrames makes from the start of
// batches, so that frame is allocated once at its size.
func frameSize(batches []terminal.Batch) int {
	n := len(batches[0].Data)
	end := batches[0].Offset + int64(n)
	for _, b := range batches[1:] {
		if b.Offset != end || 13+n+len(b.Data) > maxOutputFrame {
			break
		}
		n += len(b.Data)
		end += int64(len(b.Data))
	}
	return n
}

// input hands keystrokes to the session without ever blocking the link's
// reader: a program that does not read its input gets at most
// terminal.DefaultInputQueue bytes of it, and the rest is refused (logged
// once per run of refusals), never merged or reordered.
func (e *entry) input(data []byte) {
	s := e.session()
	if s == nil {
		return
	}
	err := s.Input(data)
	full := errors.Is(err, terminal.ErrInputFull)
	e.mu.Lock()
	first := err != nil && !e.inputRefused
	e.inputRefused = err != nil
	if full && e.online && e.d.tellRefused.Load() {
		e.refused += int64(len(data))
	}
	e.mu.Unlock()
	if full {
		e.d.signal() // the server tells the person who typed
		if first {
			e.d.opts.Logger.Warn("input refused: the program is not reading its input", "session", e.info.ID, "err", err)
		}
	}
}

// resize applies the server's size and sends a snapshot at it.
func (e *entry) resize(cols, rows int) {
	s := e.session()
	if s == nil || s.Resize(cols, rows) != nil {
		return
	}
	e.mu.Lock()
	e.info.Cols, e.info.Rows = cols, rows
	e.redraw = true
	e.mu.Unlock()
	e.d.signal()
}

func (e *entry) askRedraw() {
	e.mu.Lock()
	e.redraw = true
	e.mu.Unlock()
	e.d.signal()
}
