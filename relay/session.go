package relay

import (
	"fmt"
	"sort"
	"sync"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// session is the hub's view of one session on a daemon: where to send its
// input, the latest snapshot with the output after it (so a viewer can
// attach without a round trip), and its viewers.
type session struct {
	machineID, userID string // static

	mu          sync.Mutex // guards everything below
	info        wire.SessionInfo
	link        *link // nil while the daemon is away
	index       uint32
	snap        *wire.Snapshot // cached; nil when none or stale
	snapSeq     int64          // when snap was cached, in the hub's order (cacheRoom)
	tail        []wire.Output  // output after snap, contiguous
	tailEnd     int64          // offset after tail (snap.Offset when empty)
	tailBytes   int64
	redrawAsked bool // a snapshot was asked of the daemon and not yet received
	viewers     map[*viewer]struct{}
	sizer       *viewer // the interactive viewer that typed last
	ended       bool
}

func newSession(m Machine, info wire.SessionInfo) *session {
	return &session{machineID: m.ID, userID: m.UserID, info: info, viewers: map[*viewer]struct{}{}}
}

func (s *session) view() SessionView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionView{SessionInfo: s.info, MachineID: s.machineID, Online: s.link != nil, Viewers: len(s.viewers)}
}

func sortViews(v []SessionView) {
	sort.Slice(v, func(i, j int) bool {
		if !v[i].StartedAt.Equal(v[j].StartedAt) {
			return v[i].StartedAt.Before(v[j].StartedAt)
		}
		return v[i].ID < v[j].ID
	})
}

// viewerList copies the viewers so they are offered output without the
// session's lock held.
func (s *session) viewerList() []*viewer {
	out := make([]*viewer, 0, len(s.viewers))
	for v := range s.viewers {
		out = append(out, v)
	}
	return out
}

// bind attaches the session to a daemon's link, as (re)announced, and
// reports whether the announcement says it exited since the hub last knew.
// Such an exit happened while the daemon was away, so no exit message
// follows: viewers are told here, after the snapshot the daemon sends next.
func (s *session) bind(l *link, index uint32, info wire.SessionInfo) (exited bool) {
	s.mu.Lock()
	wasOnline := s.link != nil
	exited = info.Exited && !s.info.Exited
	s.link, s.index = l, index
	s.info = info
	s.redrawAsked = false
	waiting := false
	vs := s.viewerList()
	for _, v := range vs {
		if exited {
			v.exitedAway(info.ExitCode)
		}
		waiting = waiting || v.waiting()
	}
	if waiting {
		s.askRedraw()
	}
	s.mu.Unlock()
	if !wasOnline {
		for _, v := range vs {
			v.control(wire.Control{Type: wire.TypeStatus, Online: true})
		}
	}
	return exited
}

// unbind marks the session offline if it is still on link l.
func (s *session) unbind(l *link) {
	s.mu.Lock()
	if s.link != l {
		s.mu.Unlock()
		return
	}
	s.link, s.redrawAsked = nil, false
	vs := s.viewerList()
	s.mu.Unlock()
	for _, v := range vs {
		v.control(wire.Control{Type: wire.TypeStatus, Online: false})
	}
}

// end closes every viewer: the session is gone.
func (s *session) end() {
	s.mu.Lock()
	s.ended, s.link = true, nil
	vs := s.viewerList()
	s.mu.Unlock()
	for _, v := range vs {
		v.close()
	}
}

// askRedraw asks the daemon for a snapshot, once until it arrives. Callers
// hold s.mu.
func (s *session) askRedraw() {
	if s.redrawAsked || s.link == nil {
		return
	}
	s.redrawAsked = true
	s.link.send(wire.Control{Type: wire.TypeRedraw, Index: s.index}.Frame())
}

// publish takes an output batch from the daemon: it extends the cache and is
// offered to every viewer, each of which decides for itself.
func (s *session) publish(h *Hub, o wire.Output) {
	o.Data = append([]byte(nil), o.Data...) // the frame's buffer is reused
	s.mu.Lock()
	if s.snap != nil {
		end := o.Offset + int64(len(o.Data))
		switch {
		case end <= s.snap.Offset:
		case o.Offset == s.tailEnd && s.tailBytes+int64(len(o.Data)) <= h.opts.CacheTail:
			s.tail = append(s.tail, o)
			s.tailEnd, s.tailBytes = end, s.tailBytes+int64(len(o.Data))
		default:
			s.snap, s.tail, s.tailBytes = nil, nil, 0
		}
	}
	vs := s.viewerList()
	s.mu.Unlock()
	for _, v := range vs {
		if v.offer(o) {
			s.resync(v)
		}
	}
}

// snapshot takes a snapshot from the daemon: it becomes the cache, viewers
// waiting for one get it, and when the size changed every viewer does.
// It is not kept when the machine's cache has no room for it (cacheRoom).
func (s *session) snapshot(h *Hub, snap wire.Snapshot) {
	snap.History = append([]byte(nil), snap.History...)
	snap.Redraw = append([]byte(nil), snap.Redraw...)
	keep := h.cacheRoom(s.machineID, s, int64(len(snap.History)+len(snap.Redraw)))
	s.mu.Lock()
	resized := snap.Cols != s.info.Cols || snap.Rows != s.info.Rows
	s.info.Cols, s.info.Rows = snap.Cols, snap.Rows
	s.snap, s.tail, s.tailEnd, s.tailBytes = &snap, nil, snap.Offset, 0
	if keep {
		s.snapSeq = h.cacheSeq.Add(1)
	} else {
		s.snap = nil
	}
	s.redrawAsked = false
	vs := s.viewerList()
	s.mu.Unlock()
	for _, v := range vs {
		v.load(&snap, nil, resized || (snap.Resync && !v.follows(snap.Offset)))
	}
}

// cached returns the bytes the session's cache holds, and when its snapshot
// was cached (cacheRoom).
func (s *session) cached() (n, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return 0, 0
	}
	return int64(len(s.snap.History)+len(s.snap.Redraw)) + s.tailBytes, s.snapSeq
}

// dropCache forgets the cached snapshot and tail: the next viewer to need
// them asks the daemon for a redraw.
func (s *session) dropCache() {
	s.mu.Lock()
	s.snap, s.tail, s.tailBytes = nil, nil, 0
	s.mu.Unlock()
}

// resync gives a viewer that discarded its pending output the cached
// snapshot and tail, or asks the daemon for a fresh snapshot.
func (s *session) resync(v *viewer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != nil {
		v.load(s.snap, s.tail, true)
		return
	}
	s.askRedraw()
}

// exit records the program's exit status and reports whether it is news.
func (s *session) exit(code int) bool {
	s.mu.Lock()
	was := s.info.Exited
	s.info.Exited, s.info.ExitCode = true, code
	vs := s.viewerList()
	s.mu.Unlock()
	for _, v := range vs {
		v.exited(code)
	}
	return !was
}

// attach adds a viewer and starts it with the cached snapshot, or asks the
// daemon for one. It fails for a session that has ended.
func (s *session) attach(v *viewer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return ErrNoSession
	}
	if len(s.viewers) >= MaxViewers {
		return ErrTooManyViewers
	}
	s.viewers[v] = struct{}{}
	info := s.info
	v.controls = append(v.controls,
		wire.Control{Type: wire.TypeSession, Session: &info, WatchOnly: v.watchOnly},
		wire.Control{Type: wire.TypeStatus, Online: s.link != nil})
	if info.Exited {
		code := info.ExitCode
		v.exitCode = &code
	}
	if s.snap != nil {
		v.load(s.snap, s.tail, true)
	} else {
		s.askRedraw()
	}
	return nil
}

func (s *session) detach(v *viewer) {
	s.mu.Lock()
	delete(s.viewers, v)
	if s.sizer == v {
		s.sizer = nil
	}
	s.mu.Unlock()
}

// input forwards a keystroke, unbatched, and makes its viewer the one whose
// size the session follows.
func (s *session) input(v *viewer, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.link == nil {
		return
	}
	if s.sizer != v {
		s.sizer = v
		s.applySize(v)
	}
	if !s.link.sendInput(wire.Binary(wire.AppendDaemonInput(nil, wire.Input{Session: s.index, Data: data}))) {
		v.control(wire.Control{Type: wire.TypeRefused, Bytes: int64(len(data)), Reason: fmt.Sprintf(
			"%d bytes of input were not delivered: the connection to the machine is not keeping up, and %d MiB of input already wait to be sent to it; send it again once the terminal shows the program has caught up",
			len(data), linkInputBudget>>20)})
	}
}

// refused tells the viewer that typed last that the daemon could not
// deliver n bytes of input: the program is not reading what it is sent.
// (Its words are the server's: a daemon's reason is not shown to anyone.)
func (s *session) refused(n int64) {
	s.mu.Lock()
	v := s.sizer
	s.mu.Unlock()
	if v == nil {
		return
	}
	v.control(wire.Control{Type: wire.TypeRefused, Bytes: n, Reason: fmt.Sprintf(
		"%d bytes of input were not delivered: the program is not reading what it is sent, and the machine holds no more of it; send it again once the program has caught up", n)})
}

// sized applies a viewer's new size if the session follows it: the viewer
// that typed last, or, before anyone typed, any interactive viewer.
func (s *session) sized(v *viewer) {
	if v.watchOnly {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sizer == nil || s.sizer == v {
		s.applySize(v)
	}
}

// applySize asks the daemon to resize to v's size; callers hold s.mu.
func (s *session) applySize(v *viewer) {
	v.mu.Lock()
	cols, rows := v.cols, v.rows
	v.mu.Unlock()
	if s.link == nil || cols == 0 || (cols == s.info.Cols && rows == s.info.Rows) {
		return
	}
	s.link.send(wire.Control{Type: wire.TypeResize, Index: s.index, Cols: cols, Rows: rows}.Frame())
}
