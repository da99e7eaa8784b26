// Package relay owns the server's half of live terminals: which machines'
// daemons are connected, the sessions they report, and the viewers attached
// to each session. It forwards output batches from a daemon to every viewer
// of the session, each through its own bounded queue and acknowledgement
// window, and replaces a viewer's pending output with a redraw when that
// viewer cannot keep up, so one slow viewer never slows another or the
// session. It forwards each viewer's keystrokes, unbatched, to the daemon.
//
// It does not authenticate: the server resolves a machine token or a viewer
// ticket first and tells the hub whose socket it is. It knows nothing of
// HTTP or Fiber; it speaks WebSocket frames as relay/wire defines them.
package relay

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// Defaults for Options; the watermarks follow xterm.js's flow-control guide.
const (
	DefaultHighWater   = 100 << 10
	DefaultLowWater    = 10 << 10
	DefaultViewerQueue = 8 << 20
	DefaultViewerLag   = 3 * time.Second
	DefaultCacheTail   = 64 << 10
	// DefaultMachineCache bounds the snapshots and tails the hub caches for
	// one machine's sessions together: two of the largest snapshots.
	DefaultMachineCache = 2 * wire.MaxFromDaemon
	DefaultPing         = 20 * time.Second
	DefaultWriteWait    = 10 * time.Second
	// maxFrame bounds the output merged into one frame to a viewer.
	maxFrame = 256 << 10
	// linkQueue bounds the frames waiting for a daemon's writer.
	linkQueue = 1024
	// linkInputBudget bounds the input bytes waiting for a daemon's writer
	// (without it, 1024 frames of wire.MaxInput: a GiB): input past it is
	// refused aloud. Eight of the largest input frames: a daemon holds at
	// most one (terminal.DefaultInputQueue) for a program that is not
	// reading, so more than this waits only on a link that cannot keep up.
	linkInputBudget = 8 * wire.MaxToDaemon
	// controlQueue bounds control messages waiting for a viewer's writer.
	controlQueue = 32
	// daemonReadLimit and viewerReadLimit bound one incoming message.
	daemonReadLimit = wire.MaxFromDaemon
	viewerReadLimit = wire.MaxFromViewer
)

// ErrNoSession is returned for a session that does not exist or belongs to
// someone else; the two are not told apart.
var ErrNoSession = errors.New("relay: no such session")

// Options configure a Hub; New fills zero values with the defaults.
type Options struct {
	// HighWater and LowWater bound a viewer's unacknowledged bytes: above
	// HighWater the hub stops sending it output until acks bring it to
	// LowWater. Keep HighWater at or below 500 KB so Ctrl-C stays quick.
	HighWater, LowWater int64
	// ViewerLag is how long output may wait for one viewer: when the oldest
	// batch it has not been sent is older, its pending output is discarded
	// whole and replaced by a redraw. Judged by time, not bytes, so a viewer
	// that keeps up never gets a redraw however fast the program writes;
	// only the one that stops reading pays.
	ViewerLag time.Duration
	// ViewerQueue bounds the output bytes waiting for one viewer, for
	// memory's sake only (it is far above ViewerLag's worth at any rate a
	// viewer can keep up with); past it the same happens.
	ViewerQueue int64
	// CacheTail bounds the output kept after a session's cached snapshot,
	// which lets a viewer attach without a round trip to the daemon.
	CacheTail int64
	// MachineCache bounds the bytes cached for one machine's sessions
	// together (snapshots and their tails). A daemon sends a snapshot when
	// it likes, each up to wire.MaxSnapshot; without this bound one daemon
	// could make the hub hold that much for every session it announced. Past
	// it the oldest caches of the machine's other sessions are dropped (a
	// viewer attaching there asks the daemon for a redraw, as with no cache),
	// and a snapshot larger than the whole bound is passed on, not kept.
	MachineCache int64
	// Ping is the heartbeat interval; a socket silent for three is closed.
	Ping time.Duration
	// WriteWait is the deadline of each write.
	WriteWait time.Duration
	Logger    *slog.Logger
	// OnEvent, when set, hears of machines going online and offline and of
	// sessions starting, exiting and going away. It is called without the
	// hub's locks, from socket goroutines, and must not block.
	OnEvent func(Event)
}

// sessionKey names a session. Its id is its daemon's say-so, so it is one
// person's: another person's daemon reporting the same id has a session of
// its own, and cannot take or shut out theirs.
type sessionKey struct{ userID, id string }

// Hub holds every connected daemon, session and viewer.
type Hub struct {
	opts Options // static after New

	mu       sync.Mutex
	links    map[string]*link        // machine id → its daemon's current link
	sessions map[sessionKey]*session // by person and session id
	// machines indexes the same sessions by machine id, for the per-machine
	// bounds (wire.MaxSessions, MachineCache); an entry exists while the
	// machine has a session.
	machines map[string]map[*session]struct{}
	closed   bool
	// cacheSeq orders the snapshots cached, oldest first (cacheRoom).
	cacheSeq atomic.Int64

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // socket goroutines
}

// New returns an empty Hub.
func New(o Options) *Hub {
	if o.HighWater <= 0 {
		o.HighWater = DefaultHighWater
	}
	if o.LowWater <= 0 || o.LowWater >= o.HighWater {
		o.LowWater = min(DefaultLowWater, o.HighWater/2)
	}
	if o.ViewerQueue <= 0 {
		o.ViewerQueue = DefaultViewerQueue
	}
	if o.ViewerLag <= 0 {
		o.ViewerLag = DefaultViewerLag
	}
	if o.CacheTail <= 0 {
		o.CacheTail = DefaultCacheTail
	}
	if o.MachineCache <= 0 {
		o.MachineCache = DefaultMachineCache
	}
	if o.Ping <= 0 {
		o.Ping = DefaultPing
	}
	if o.WriteWait <= 0 {
		o.WriteWait = DefaultWriteWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Hub{opts: o, links: map[string]*link{}, sessions: map[sessionKey]*session{}, machines: map[string]map[*session]struct{}{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Close ends every socket and waits for their goroutines.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// SessionView is what a person sees of a session.
type SessionView struct {
	wire.SessionInfo
	MachineID string `json:"machineId"`
	Online    bool   `json:"online"`
	Viewers   int    `json:"viewers"`
}

// Sessions lists a machine's sessions known to the hub, oldest first. The
// caller has checked that the machine is the person's.
func (h *Hub) Sessions(machineID string) []SessionView {
	h.mu.Lock()
	var ss []*session
	for _, s := range h.sessions {
		if s.machineID == machineID {
			ss = append(ss, s)
		}
	}
	h.mu.Unlock()
	out := make([]SessionView, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.view())
	}
	sortViews(out)
	return out
}

// Session finds one of userID's sessions.
func (h *Hub) Session(userID, id string) (SessionView, error) {
	s, err := h.session(userID, id)
	if err != nil {
		return SessionView{}, err
	}
	return s.view(), nil
}

func (h *Hub) session(userID, id string) (*session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[sessionKey{userID, id}]
	if s == nil {
		return nil, ErrNoSession
	}
	return s, nil
}

// Online reports whether a machine's daemon is connected.
func (h *Hub) Online(machineID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.links[machineID] != nil
}

// Disconnect closes a machine's daemon socket at once (its token was
// revoked) and forgets its sessions.
func (h *Hub) Disconnect(machineID string) {
	h.mu.Lock()
	l := h.links[machineID]
	if l != nil {
		l.revoked = true
	}
	gone := h.takeLocked(machineID, nil)
	h.mu.Unlock()
	if l != nil {
		l.close()
	}
	for _, s := range gone {
		s.end()
	}
	h.emitGone(gone)
}

// takeLocked removes the sessions of machineID from the hub, but those keep
// reports true for, and returns them. h.mu is held.
func (h *Hub) takeLocked(machineID string, keep func(id string) bool) []*session {
	var gone []*session
	for k, s := range h.sessions {
		if s.machineID == machineID && (keep == nil || !keep(k.id)) {
			gone = append(gone, s)
			h.deleteLocked(k, s)
		}
	}
	return gone
}

// addLocked records a new session of the hub. h.mu is held.
func (h *Hub) addLocked(k sessionKey, s *session) {
	h.sessions[k] = s
	if h.machines[s.machineID] == nil {
		h.machines[s.machineID] = map[*session]struct{}{}
	}
	h.machines[s.machineID][s] = struct{}{}
}

// deleteLocked forgets a session of the hub. h.mu is held.
func (h *Hub) deleteLocked(k sessionKey, s *session) {
	delete(h.sessions, k)
	delete(h.machines[s.machineID], s)
	if len(h.machines[s.machineID]) == 0 {
		delete(h.machines, s.machineID)
	}
}

// cacheRoom makes room in the machine's cache for size more bytes of s's,
// dropping the oldest caches of the machine's other sessions as needed; it
// reports false when size alone is over MachineCache, and s's snapshot is
// then passed on but not kept.
func (h *Hub) cacheRoom(machineID string, s *session, size int64) bool {
	if size > h.opts.MachineCache {
		return false
	}
	h.mu.Lock()
	others := make([]*session, 0, len(h.machines[machineID]))
	for o := range h.machines[machineID] {
		if o != s {
			others = append(others, o)
		}
	}
	h.mu.Unlock()
	type held struct {
		s      *session
		n, seq int64
	}
	cached := make([]held, 0, len(others))
	total := size
	for _, o := range others {
		if n, seq := o.cached(); n > 0 {
			cached = append(cached, held{o, n, seq})
			total += n
		}
	}
	if total <= h.opts.MachineCache {
		return true
	}
	sort.Slice(cached, func(i, j int) bool { return cached[i].seq < cached[j].seq })
	for _, c := range cached {
		if total <= h.opts.MachineCache {
			break
		}
		c.s.dropCache()
		total -= c.n
	}
	return true
}

// keepReading extends conn's read deadline on every pong and returns a func
// that does the same after each message.
func keepReading(conn *websocket.Conn, ping time.Duration) func() {
	extend := func() { _ = conn.SetReadDeadline(time.Now().Add(3 * ping)) }
	conn.SetPongHandler(func(string) error { extend(); return nil })
	extend()
	return extend
}

// messageReader reads a socket's messages into one buffer it reuses, where
// ReadMessage allocates each message anew and grows it from 512 bytes, a
// read and a copy at every doubling, for every 64 KiB output frame of a
// daemon (docs/BENCHMARKS.md, the terminal section). A message is valid
// until the next read.
type messageReader struct {
	conn *websocket.Conn
	buf  bytes.Buffer
}

// keepBuffer bounds the buffer a messageReader keeps between messages: a
// rare large message (a snapshot with its history) is not held for good.
const keepBuffer = 1 << 20

func (m *messageReader) read() (typ int, p []byte, err error) {
	typ, r, err := m.conn.NextReader()
	if err != nil {
		return 0, nil, err
	}
	if m.buf.Cap() > keepBuffer {
		m.buf = bytes.Buffer{}
	}
	m.buf.Reset()
	if _, err := m.buf.ReadFrom(r); err != nil {
		return 0, nil, err
	}
	return typ, m.buf.Bytes(), nil
}

// closeConn closes a socket so that its reader returns at once. Closing a
// WebSocket the server hijacked from fasthttp does nothing until the handler
// returns (fasthttp closes it then), so the reader is woken by a past read
// deadline and the connection underneath is closed.
func closeConn(c *websocket.Conn) {
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if u, ok := c.NetConn().(interface{ UnsafeConn() net.Conn }); ok {
		_ = u.UnsafeConn().Close()
	}
	_ = c.Close()
}

// Forget drops the sessions of a machine whose daemon is not linked here
// (another server instance now holds it), ending their viewers, which dial
// again; nothing is emitted, since the sessions live on elsewhere. A linked
// machine is left alone.
func (h *Hub) Forget(machineID string) {
	h.mu.Lock()
	if h.links[machineID] != nil {
		h.mu.Unlock()
		return
	}
	gone := h.takeLocked(machineID, nil)
	h.mu.Unlock()
	for _, s := range gone {
		s.end()
	}
}
