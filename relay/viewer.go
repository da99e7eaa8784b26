package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/terminal"
)

// viewer is one viewer's socket on one session. Its reader is ServeViewer's
// goroutine; its writer sends what the session offers it, paced by the
// viewer's acknowledgements.
type viewer struct {
	hub       *Hub     // static
	sess      *session // static
	conn      *websocket.Conn
	watchOnly bool          // static
	wake      chan struct{} // capacity 1: something to send
	done      chan struct{} // closed by close
	once      sync.Once

	mu sync.Mutex // guards everything below; taken after session.mu, never before
	// next is the offset the next batch must start at; -1 while waiting for
	// a snapshot, when output is ignored.
	next         int64
	pending      []wire.Output // contiguous batches not yet sent
	pendingAt    []time.Time   // when each of pending was queued
	pendingBytes int64
	snap         *wire.Snapshot // to send before pending; nil for none
	fresh        bool           // no snapshot sent yet: the next carries history
	sent, acked  int64          // payload bytes written to / acknowledged by the viewer
	paused       bool           // over the high watermark, until acks reach the low one
	controls     []wire.Control
	exitCode     *int // to send once the output before it is sent
	cols, rows   int  // the viewer's own size, 0 until it says
}

func (v *viewer) signal() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

func (v *viewer) close() {
	v.once.Do(func() {
		close(v.done)
		closeConn(v.conn)
	})
}

// closeWith tells the viewer why its socket ends, so the page knows not to
// dial again, and closes it once the viewer has answered the close (its
// reader then returns) or after closeGrace. Closing at once could reset a
// connection with unread acks in it, and the close frame would be lost. A
// close frame may be written beside the writer goroutine: WriteControl is
// safe concurrently.
func (v *viewer) closeWith(code int, text string) {
	select {
	case <-v.done:
		return
	default:
	}
	_ = v.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text),
		time.Now().Add(v.hub.opts.WriteWait))
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-v.done:
	case <-t.C:
		v.close()
	}
}

func (v *viewer) waiting() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.next < 0
}

// follows reports whether the viewer has every byte before offset (and
// perhaps some after it: a snapshot's tail, which follows it as output,
// repeats those, and offer skips them).
func (v *viewer) follows(offset int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.next >= offset
}

// offer queues a batch. It reports true when the batch did not follow what
// the viewer has, or its queue overflowed: its pending output is then
// discarded whole and it needs a snapshot.
func (v *viewer) offer(o wire.Output) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.next < 0 {
		return false
	}
	n := int64(len(o.Data))
	if o.Offset+n <= v.next {
		return false
	}
	if o.Offset < v.next { // a snapshot's tail repeating what the viewer has, up to a batch boundary
		o.Data, o.Offset = o.Data[v.next-o.Offset:], v.next
		n = int64(len(o.Data))
	}
	now := time.Now()
	if o.Offset != v.next || v.pendingBytes+n > v.hub.opts.ViewerQueue || v.stale(now) {
		v.pending, v.pendingAt, v.pendingBytes, v.snap, v.next = nil, nil, 0, nil, -1
		return true
	}
	v.pending = append(v.pending, o)
	v.pendingAt = append(v.pendingAt, now)
	v.pendingBytes += n
	v.next += n
	v.signal()
	return false
}

// load replaces the viewer's pending output by a snapshot and the output
// after it. Without force it only serves a viewer waiting for a snapshot.
func (v *viewer) load(snap *wire.Snapshot, tail []wire.Output, force bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.next >= 0 && !force {
		return
	}
	v.snap, v.next = snap, snap.Offset
	v.pending, v.pendingBytes = append([]wire.Output(nil), tail...), 0
	v.pendingAt = make([]time.Time, len(tail))
	now := time.Now()
	for i, o := range tail {
		v.pendingAt[i] = now
		v.pendingBytes += int64(len(o.Data))
		v.next = o.Offset + int64(len(o.Data))
	}
	v.signal()
}

// control queues a control message; a viewer that lets controlQueue pile up
// is a stuck consumer and is closed.
func (v *viewer) control(c wire.Control) {
	v.mu.Lock()
	full := len(v.controls) >= controlQueue
	if !full {
		v.controls = append(v.controls, c)
	}
	v.mu.Unlock()
	if full {
		v.close()
		return
	}
	v.signal()
}

func (v *viewer) exited(code int) {
	v.mu.Lock()
	v.exitCode = &code
	v.mu.Unlock()
	v.signal()
}

// exitedAway records an exit that happened while the daemon was away: the
// output before it comes only as the snapshot the daemon sends on
// reconnecting, so the viewer waits for a snapshot and gets the exit after
// it. Callers hold the session's lock.
func (v *viewer) exitedAway(code int) {
	v.mu.Lock()
	v.pending, v.pendingAt, v.pendingBytes, v.snap, v.next = nil, nil, 0, nil, -1
	v.exitCode = &code
	v.mu.Unlock()
	v.signal()
}

// ack records that the viewer wrote bytes of payload so far. Acks beyond
// what was sent or going backwards are ignored.
func (v *viewer) ack(bytes int64) {
	v.mu.Lock()
	if bytes > v.acked && bytes <= v.sent {
		v.acked = bytes
		if v.paused && v.sent-v.acked <= v.hub.opts.LowWater {
			v.paused = false
		}
	}
	v.mu.Unlock()
	v.signal()
}

// nextFrame picks what to send now: a due snapshot, a control message,
// pending output merged up to maxFrame while the window is open, or the
// exit status once no output is left before it. Output that waited longer
// than ViewerLag is discarded instead, and resync asks for a redraw. An
// output frame (output) goes back to the pool once written (putFrame).
func (v *viewer) nextFrame() (typ int, frame []byte, resync, output bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	o := v.hub.opts
	if v.snap != nil && v.sent-v.acked <= o.LowWater {
		data := v.snap.Redraw
		if v.fresh {
			ts := terminal.Snapshot{Rows: v.snap.Rows, History: v.snap.History, Redraw: v.snap.Redraw}
			data = ts.Attach()
		}
		frame = wire.AppendViewerSnapshot(nil, v.snap.Offset, v.snap.Cols, v.snap.Rows, data)
		v.snap, v.fresh = nil, false
		v.account(int64(len(data)))
		return websocket.BinaryMessage, frame, false, false
	}
	if len(v.controls) > 0 {
		c := v.controls[0]
		v.controls = v.controls[1:]
		return websocket.TextMessage, c.Encode(), false, false
	}
	if v.snap == nil && len(v.pending) > 0 && !v.paused {
		if v.stale(time.Now()) {
			v.pending, v.pendingAt, v.pendingBytes, v.next = nil, nil, 0, -1
			return 0, nil, true, false
		}
		return websocket.BinaryMessage, v.takeOutput(), false, true
	}
	if v.exitCode != nil && v.snap == nil && len(v.pending) == 0 && v.next >= 0 {
		c := wire.Control{Type: wire.TypeExit, ExitCode: *v.exitCode}
		v.exitCode = nil
		return websocket.TextMessage, c.Encode(), false, false
	}
	return 0, nil, false, false
}

// stale reports whether the oldest output waiting for the viewer has waited
// longer than ViewerLag; callers hold v.mu.
func (v *viewer) stale(now time.Time) bool {
	return len(v.pendingAt) > 0 && now.Sub(v.pendingAt[0]) > v.hub.opts.ViewerLag
}

// takeOutput merges pending batches into one frame, no larger than the
// window has room for (but at least one batch); every cut stays a batch
// boundary.
func (v *viewer) takeOutput() []byte {
	first := v.pending[0]
	limit := 9 + min(maxFrame, v.hub.opts.HighWater-(v.sent-v.acked))
	frame := wire.AppendViewerOutput(getFrame(), first.Offset, nil)
	n := 0
	for n < len(v.pending) && (n == 0 || int64(len(frame)+len(v.pending[n].Data)) <= limit) {
		frame = append(frame, v.pending[n].Data...)
		v.pendingBytes -= int64(len(v.pending[n].Data))
		n++
	}
	v.pending, v.pendingAt = v.pending[n:], v.pendingAt[n:]
	if len(v.pending) == 0 {
		v.pending, v.pendingAt = nil, nil
	}
	v.account(int64(len(frame) - 9))
	return frame
}

// frames holds output frame buffers between writes, shared by every viewer:
// a viewer that streams reuses one instead of allocating each frame, and an
// idle one holds none.
var frames sync.Pool

func getFrame() []byte {
	if p, ok := frames.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, 9+maxFrame)
}

// putFrame returns an output frame's buffer once it is written.
func putFrame(b []byte) {
	if cap(b) <= 9+maxFrame {
		frames.Put(&b)
	}
}

func (v *viewer) account(n int64) {
	v.sent += n
	if v.sent-v.acked >= v.hub.opts.HighWater {
		v.paused = true
	}
}

// write is the viewer's only writer.
func (v *viewer) write(ctx context.Context) {
	tick := time.NewTicker(v.hub.opts.Ping)
	defer tick.Stop()
	for {
		typ, frame, resync, output := v.nextFrame()
		var err error
		if resync { // its output waited too long: a redraw replaces it
			v.sess.resync(v)
			continue
		}
		if frame != nil {
			_ = v.conn.SetWriteDeadline(time.Now().Add(v.hub.opts.WriteWait))
			err = v.conn.WriteMessage(typ, frame)
			if output {
				putFrame(frame)
			}
		} else {
			select {
			case <-ctx.Done():
				v.close()
				return
			case <-v.done:
				return
			case <-v.wake:
			case <-tick.C:
				err = v.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(v.hub.opts.WriteWait))
			}
		}
		if errors.Is(err, websocket.ErrCloseSent) {
			return // closeWith is waiting for the viewer's answer
		}
		if err != nil {
			v.close()
			return
		}
	}
}

// CloseSignedOut is the close code of a viewer socket whose ctx ended: the
// sign-in that opened it ended, and dialling again will not help.
const CloseSignedOut = 4004

// CloseTooManyViewers is the close code of a viewer socket refused because
// its session already has MaxViewers viewers; dialling again later may work.
const CloseTooManyViewers = 4008

// MaxViewers is the most viewers one session has at once. Each is a socket,
// two goroutines and a queue, and each output batch is offered to every one:
// without a bound, one sign-in's tickets could attach without end.
const MaxViewers = 32

// ErrTooManyViewers refuses a viewer of a session that has MaxViewers.
var ErrTooManyViewers = errors.New("relay: the session has the most viewers it takes")

// closeGrace is how long a closing viewer socket waits for the viewer's
// answering close frame.
const closeGrace = time.Second

// ServeViewer runs a viewer's socket on one of userID's sessions until it
// closes, the session ends, or ctx does (the sign-in that opened it ended:
// closed with CloseSignedOut). The server has redeemed the viewer's ticket:
// the session is the ticket's, whatever the viewer's messages name.
func (h *Hub) ServeViewer(ctx context.Context, userID, sessionID string, watchOnly bool, conn *websocket.Conn) error {
	s, err := h.session(userID, sessionID)
	if err != nil {
		return err
	}
	v := &viewer{hub: h, sess: s, conn: conn, watchOnly: watchOnly, next: -1, fresh: true,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errors.New("relay: closed")
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	if err := s.attach(v); err != nil {
		if errors.Is(err, ErrTooManyViewers) {
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseTooManyViewers,
				fmt.Sprintf("This session already has %d viewers, the most at once.", MaxViewers)), time.Now().Add(h.opts.WriteWait))
		}
		return err
	}
	m := Machine{ID: s.machineID, UserID: s.userID}
	h.emit(EventSessionViewers, m, s)
	defer func() {
		s.detach(v)
		h.emit(EventSessionViewers, m, s)
	}()
	wctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { v.closeWith(CloseSignedOut, "signed out") })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); v.write(wctx) }()
	err = h.readViewer(v)
	v.close()
	cancel()
	wg.Wait()
	return err
}

func (h *Hub) readViewer(v *viewer) error {
	v.conn.SetReadLimit(viewerReadLimit)
	extend := keepReading(v.conn, h.opts.Ping)
	for {
		typ, p, err := v.conn.ReadMessage()
		if err != nil {
			return err
		}
		extend()
		if typ == websocket.TextMessage {
			err = h.viewerControl(v, p)
		} else {
			err = h.viewerFrame(v, p)
		}
		if err != nil {
			return err
		}
	}
}

func (h *Hub) viewerFrame(v *viewer, p []byte) error {
	f, err := wire.DecodeViewer(p)
	if err != nil {
		return err
	}
	if f.Input == nil {
		return errors.New("relay: a viewer may send only input frames")
	}
	if len(f.Input) > wire.MaxInput {
		// forwarded, it would break the daemon's read limit and take the
		// whole machine offline; refused, the viewer can say so
		v.control(wire.Control{Type: wire.TypeRefused, Bytes: int64(len(f.Input)), Reason: fmt.Sprintf(
			"input of %d bytes refused: at most %d bytes (%d KiB) can be sent at once", len(f.Input), wire.MaxInput, wire.MaxInput>>10)})
		return nil
	}
	if !v.watchOnly && len(f.Input) > 0 {
		v.sess.input(v, f.Input)
	}
	return nil
}

func (h *Hub) viewerControl(v *viewer, p []byte) error {
	c, err := wire.DecodeFromViewer(p)
	if err != nil {
		return err
	}
	switch c.Type {
	case wire.TypeAck:
		v.ack(c.Bytes)
	case wire.TypeResize:
		v.mu.Lock()
		v.cols, v.rows = c.Cols, c.Rows
		v.mu.Unlock()
		v.sess.sized(v)
	}
	return nil
}
