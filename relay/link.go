package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// Machine is whose daemon a socket belongs to, as the server authenticated it.
type Machine struct {
	ID     string
	UserID string
}

// link is one daemon's socket. Its reader is ServeDaemon's goroutine; its
// writer sends what others queue on out.
type link struct {
	machine Machine // static
	conn    *websocket.Conn
	out     chan wire.Frame // frames for the writer; full means a stuck daemon
	// inputQueued is the bytes of input frames on out: sendInput refuses
	// input past linkInputBudget instead of holding it.
	inputQueued atomic.Int64
	done        chan struct{} // closed by close
	once        sync.Once
	// revoked is set by Disconnect, under the hub's lock: from then on the
	// link speaks for no session, even before its reader has stopped.
	revoked bool

	// byIndex maps the daemon's session indexes to sessions; owned by the
	// reader goroutine.
	byIndex map[uint32]*session
	// announced lists the session ids announced on this link before
	// "synced"; owned by the reader.
	announced map[string]bool
}

// close ends the link; safe to call more than once and from any goroutine.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		closeConn(l.conn)
	})
}

// send queues a frame for the daemon. A daemon that does not read what it
// is sent (a full queue) is a stuck consumer: its link is closed, and it
// reconnects.
func (l *link) send(frame wire.Frame) {
	select {
	case l.out <- frame:
	case <-l.done:
	default:
		l.close()
	}
}

// sendInput queues an input frame (a binary frame) for the daemon unless
// linkInputBudget bytes of input already wait for a daemon that is not
// reading them as fast as they come (a slow or stalled network, a stuck
// daemon): then it reports false and queues nothing, and the caller tells
// whoever typed. The frame count still bounds the queue, as for send.
func (l *link) sendInput(frame wire.Frame) bool {
	n := int64(len(frame.Data))
	if l.inputQueued.Add(n) > linkInputBudget {
		l.inputQueued.Add(-n)
		return false
	}
	select {
	case l.out <- frame:
	case <-l.done:
		l.inputQueued.Add(-n)
	default:
		l.inputQueued.Add(-n)
		l.close()
	}
	return true
}

// ServeDaemon runs a daemon's socket until it closes, the machine is
// disconnected or the hub closes. A new socket for the same machine
// replaces the old one. ctx ending means the machine was revoked: the link
// is disconnected as Disconnect does, at once if ctx has already ended by
// the time the link is registered, so a revoke that lands between the
// server admitting the daemon and this registration still takes.
func (h *Hub) ServeDaemon(ctx context.Context, m Machine, conn *websocket.Conn) error {
	l := &link{machine: m, conn: conn, out: make(chan wire.Frame, linkQueue), done: make(chan struct{}),
		byIndex: map[uint32]*session{}, announced: map[string]bool{}}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errors.New("relay: closed")
	}
	old := h.links[m.ID]
	h.links[m.ID] = l
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	if old != nil {
		old.close()
	}
	revoked := context.AfterFunc(ctx, func() { h.Disconnect(m.ID); l.close() })
	defer revoked()
	h.emit(EventMachineOnline, m, nil)
	wctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.writeLink(wctx, l) }()
	err := h.readLink(l)
	l.close()
	cancel()
	wg.Wait()
	h.dropLink(l)
	return err
}

// writeLink is the link's only writer.
func (h *Hub) writeLink(ctx context.Context, l *link) {
	tick := time.NewTicker(h.opts.Ping)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			l.close()
			return
		case <-l.done:
			return
		case f := <-l.out:
			_ = l.conn.SetWriteDeadline(time.Now().Add(h.opts.WriteWait))
			typ := websocket.BinaryMessage
			if f.Text {
				typ = websocket.TextMessage
			}
			err = l.conn.WriteMessage(typ, f.Data)
			if !f.Text { // input (sendInput), now with the socket
				l.inputQueued.Add(-int64(len(f.Data)))
			}
		case <-tick.C:
			err = l.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(h.opts.WriteWait))
		}
		if err != nil {
			l.close()
			return
		}
	}
}

// readLink reads the daemon's frames until the socket fails. A frame that
// does not decode ends the link, except a session announcement that breaks
// a limit, which is ignored alone; a frame that names a session the daemon
// never announced is ignored.
func (h *Hub) readLink(l *link) error {
	l.conn.SetReadLimit(daemonReadLimit)
	extend := keepReading(l.conn, h.opts.Ping)
	m := messageReader{conn: l.conn} // frames' data is copied where it is kept
	for {
		typ, p, err := m.read()
		if err != nil {
			return err
		}
		extend()
		if typ == websocket.TextMessage {
			err = h.daemonControl(l, p)
		} else {
			err = h.daemonFrame(l, p)
		}
		if err != nil {
			h.opts.Logger.Warn("daemon sent a bad message; closing its socket", "machine", l.machine.ID, "err", err)
			return err
		}
	}
}

func (h *Hub) daemonFrame(l *link, p []byte) error {
	f, err := wire.DecodeDaemon(p)
	if err != nil {
		return err
	}
	switch {
	case f.Output != nil:
		if s := l.byIndex[f.Output.Session]; s != nil {
			s.publish(h, *f.Output)
		}
	case f.Snapshot != nil:
		if s := l.byIndex[f.Snapshot.Session]; s != nil {
			s.snapshot(h, *f.Snapshot)
		}
	case f.Input != nil:
		return errors.New("relay: input frame from a daemon")
	}
	return nil
}

func (h *Hub) daemonControl(l *link, p []byte) error {
	c, err := wire.DecodeFromDaemon(p)
	if errors.Is(err, wire.ErrSession) {
		// One session the server cannot list: closing the link would drop
		// the machine's other sessions, and the daemon would announce it
		// again on reconnecting. Its frames name an unknown index and are
		// ignored; the protocol has no error message for the daemon.
		h.opts.Logger.Warn("daemon announced a session outside the limits; ignored", "machine", l.machine.ID, "index", c.Index, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	switch c.Type {
	case wire.TypeSession:
		h.announce(l, c.Index, *c.Session)
	case wire.TypeSynced:
		h.forgetUnannounced(l)
	case wire.TypeExit:
		if s := l.byIndex[c.Index]; s != nil && s.exit(c.ExitCode) {
			h.emit(EventSessionExited, l.machine, s)
		}
	case wire.TypeGone:
		if s := l.byIndex[c.Index]; s != nil {
			delete(l.byIndex, c.Index)
			delete(l.announced, s.info.ID)
			h.remove(s)
		}
	case wire.TypeRefused:
		if s := l.byIndex[c.Index]; s != nil {
			s.refused(c.Bytes)
		}
	}
	return nil
}

// announce binds a session the daemon reports to this link. A session id
// already held by another machine of the person is ignored: a daemon speaks
// only for its own machine. Another person's session of the same id is
// another session (sessionKey).
func (h *Hub) announce(l *link, index uint32, info wire.SessionInfo) {
	h.mu.Lock()
	if h.links[l.machine.ID] != l || l.revoked {
		h.mu.Unlock()
		return
	}
	key := sessionKey{l.machine.UserID, info.ID}
	s := h.sessions[key]
	if s != nil && s.machineID != l.machine.ID {
		h.mu.Unlock()
		h.opts.Logger.Warn("daemon announced another machine's session id; ignored", "machine", l.machine.ID, "session", info.ID)
		return
	}
	started := s == nil
	if started && len(h.machines[l.machine.ID]) >= wire.MaxSessions {
		h.mu.Unlock()
		h.opts.Logger.Warn("daemon announced more sessions than a machine may list; ignored", "machine", l.machine.ID, "session", info.ID, "limit", wire.MaxSessions)
		return
	}
	if started {
		s = newSession(l.machine, info)
		h.addLocked(key, s)
	}
	h.mu.Unlock()
	for i, other := range l.byIndex {
		if other == s && i != index {
			delete(l.byIndex, i)
		}
	}
	l.byIndex[index] = s
	l.announced[info.ID] = true
	exited := s.bind(l, index, info)
	switch {
	case started:
		h.emit(EventSessionStarted, l.machine, s)
	case exited:
		h.emit(EventSessionExited, l.machine, s)
	}
}

// forgetUnannounced drops the machine's sessions this link did not report:
// the daemon restarted without them.
func (h *Hub) forgetUnannounced(l *link) {
	h.mu.Lock()
	var gone []*session
	if h.links[l.machine.ID] == l {
		gone = h.takeLocked(l.machine.ID, func(id string) bool { return l.announced[id] })
	}
	h.mu.Unlock()
	for _, s := range gone {
		s.end()
	}
	h.emitGone(gone)
}

func (h *Hub) remove(s *session) {
	h.mu.Lock()
	if key := (sessionKey{s.userID, s.info.ID}); h.sessions[key] == s {
		h.deleteLocked(key, s)
	}
	h.mu.Unlock()
	s.end()
	h.emitGone([]*session{s})
}

// dropLink marks the link's sessions offline; they stay listed and their
// viewers stay attached until the daemon comes back or is disconnected.
func (h *Hub) dropLink(l *link) {
	h.mu.Lock()
	current := h.links[l.machine.ID] == l
	if current {
		delete(h.links, l.machine.ID)
	}
	h.mu.Unlock()
	for _, s := range l.byIndex {
		s.unbind(l)
	}
	if current {
		h.emit(EventMachineOffline, l.machine, nil)
	}
}
