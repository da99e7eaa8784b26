// Package bridge owns the extension side of a tool call's path: the hub of
// browser sockets each person has connected, what each browser has open, and
// routing a validated call to the right browser and back.
//
// It speaks the extension socket protocol (docs/PROTOCOL.md) over any Socket
// (the server hands it an upgraded WebSocket) and reads shared sites and
// browsers from the store. It knows nothing of HTTP, tickets or Fiber: the
// caller authenticates the socket before handing it over.
package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
)

// ErrClosed is returned once the hub has shut down.
var ErrClosed = errors.New("bridge: hub closed")

// ErrNotConnected is returned by Send for a browser that has no socket.
var ErrNotConnected = errors.New("bridge: browser not connected")

// Socket is what the hub needs of a WebSocket; *websocket.Conn from
// github.com/fasthttp/websocket (and gorilla's) has it. Close, WriteControl
// and NetConn may be called from any goroutine; every other method is called
// only by its socket's reader or its writer.
type Socket interface {
	// NetConn is the connection under the socket. Its deadlines are how a
	// stuck read or write is cut short: under fasthttp, Close of a hijacked
	// connection does nothing until the handler returns.
	NetConn() net.Conn
	ReadMessage() (messageType int, p []byte, err error)
	WriteMessage(messageType int, data []byte) error
	WriteControl(messageType int, data []byte, deadline time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
	SetReadLimit(limit int64)
	Close() error
}

// Options configures a Hub. Zero values take the documented defaults.
type Options struct {
	DB     *store.DB
	Logger *slog.Logger
	// Idle closes a socket silent for longer (default DefaultIdle; the
	// extension pings every PingInterval).
	Idle time.Duration
	// QueueSize bounds the replies and pushes queued for each socket
	// (default 64 messages); a browser that lets them pile up is closed as a
	// slow consumer. Calls, their cancels and the approvals count have room
	// of their own (queue.go).
	QueueSize int
	// MaxCalls is how many calls one browser runs at once (default
	// DefaultMaxCalls); Invoke answers a *sitetools.BusyError beyond it.
	MaxCalls int
	// MaxMessage is the largest frame a browser may send (default
	// DefaultMaxMessage).
	MaxMessage int64
	// WriteTimeout bounds one write to a socket (default 10 s).
	WriteTimeout time.Duration
	// CloseGrace is how long a closing socket waits for the browser's close
	// frame before the connection is cut (default 1 s).
	CloseGrace time.Duration
	// PingInterval is the ping interval the welcome asks for (default
	// DefaultPingInterval).
	PingInterval time.Duration
	// CallTimeout is the longest a call runs in the browser (default
	// sitetools.CallTimeout); the welcome tells the extension, whose own
	// timer for a call is a backstop within it. The server sets it to the
	// timeout its calls are given.
	CallTimeout time.Duration
	// AnnouncePace bounds the tools.announce messages each socket has
	// processed, in number and bytes (pace.go); zero fields take
	// DefaultAnnouncePace's. An announcement beyond it is held, one per
	// document, the newest winning.
	AnnouncePace Pace
	// Catalog receives the tools each document announces; nil ignores them.
	Catalog *sitetools.Catalog
	// OnChange, if set, hears of every change a person's pages show: a
	// browser connected or disconnected, a document's tools came or went,
	// a browser's open shared sites changed. It is called on the socket's
	// goroutine outside every lock and must not block.
	OnChange func(userID string, ch Change)
}

func (o *Options) fillDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Idle == 0 {
		o.Idle = DefaultIdle
	}
	if o.QueueSize == 0 {
		o.QueueSize = 64
	}
	if o.MaxCalls == 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.MaxMessage == 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.CloseGrace == 0 {
		o.CloseGrace = time.Second
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = sitetools.CallTimeout
	}
	o.AnnouncePace.fillDefaults()
}

// Defaults of the limits the welcome sends (Limits). The extension starts
// with the same numbers until its first welcome (extension/lib/messages.js).
const (
	DefaultMaxMessage   = 1 << 20
	DefaultPingInterval = 20 * time.Second
	DefaultIdle         = 60 * time.Second
)

// DefaultMaxCalls is how many calls one browser runs at once by default:
// far more than a person's tabs can usefully run side by side, and small
// enough that the queue room reserved for them (queue.go) and the calls'
// arguments held meanwhile stay bounded (docs/DECISIONS.md).
const DefaultMaxCalls = 32

// Hub holds every connected browser socket, per person.
type Hub struct {
	opts Options // static after NewHub

	// ctx ends when Close starts; database calls on a socket's behalf use it.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts running Serve calls; Close waits for them.
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool               // guarded by mu
	people map[string]*person // guarded by mu; entries are never removed
	all    map[*conn]struct{} // guarded by mu: every socket in Serve, hello or not
}

// person is one person's connected browsers.
type person struct {
	// order serialises loading and enqueueing this person's site lists, so
	// every browser receives them in the order they were read.
	order    sync.Mutex
	browsers map[string]*conn // by browser id; guarded by Hub.mu
}

// NewHub returns a Hub; Close ends it.
func NewHub(opts Options) *Hub {
	opts.fillDefaults()
	h := &Hub{opts: opts, people: map[string]*person{}, all: map[*conn]struct{}{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Accepting reports whether the hub still takes sockets.
func (h *Hub) Accepting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.closed
}

// Close ends every socket with 1001 (going away) and waits until each has
// finished. Sockets handed to Serve afterwards are closed at once.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	conns := make([]*conn, 0, len(h.all))
	for c := range h.all {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	h.cancel()
	for _, c := range conns {
		c.shut(CloseGoingAway, "server shutting down")
	}
	h.wg.Wait()
}

// enter registers a socket about to be served; false once the hub is closed.
func (h *Hub) enter(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	h.all[c] = struct{}{}
	return true
}

func (h *Hub) leave(c *conn) {
	h.mu.Lock()
	delete(h.all, c)
	current := false
	if p := h.people[c.userID]; p != nil && c.browserID != "" && p.browsers[c.browserID] == c {
		delete(p.browsers, c.browserID)
		current = true
	}
	h.mu.Unlock()
	// A socket replaced by a newer one of the same browser leaves the
	// catalog to its successor, which announces for itself.
	if current && h.opts.Catalog != nil {
		h.opts.Catalog.ForgetBrowser(c.userID, c.browserID)
	}
	if current && c.ready {
		c.changed(ChangeDisconnected, "")
	}
	h.wg.Done()
}

func (h *Hub) personOf(userID string) *person {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.people[userID]
	if p == nil {
		p = &person{browsers: map[string]*conn{}}
		h.people[userID] = p
	}
	return p
}

// attach makes c the socket of its browser and returns the one it replaces.
func (h *Hub) attach(p *person, c *conn) (old *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old = p.browsers[c.browserID]
	p.browsers[c.browserID] = c
	return old
}

// browsersOf snapshots a person's connected sockets.
func (h *Hub) browsersOf(userID string) []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.people[userID]
	if p == nil {
		return nil
	}
	out := make([]*conn, 0, len(p.browsers))
	for _, c := range p.browsers {
		out = append(out, c)
	}
	return out
}

func (h *Hub) browser(userID, browserID string) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.people[userID]; p != nil {
		return p.browsers[browserID]
	}
	return nil
}

// PushSites reads the person's shared sites and sends the list to every
// browser of theirs that is connected. Call it after any change to them.
func (h *Hub) PushSites(ctx context.Context, userID string) error {
	p := h.personOf(userID)
	p.order.Lock()
	defer p.order.Unlock()
	sites, err := h.sites(ctx, userID)
	if err != nil {
		return err
	}
	msg := encode(sitesMsg{Type: TypeSites, SharedSites: sites})
	for _, c := range h.browsersOf(userID) {
		c.setShared(sites)
		c.enqueue(msg)
	}
	return nil
}

func (h *Hub) sites(ctx context.Context, userID string) ([]Site, error) {
	rows, err := h.opts.DB.SharedSites(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]Site, len(rows))
	for i, r := range rows {
		out[i] = Site{ID: r.ID, Origin: r.Origin, WorkspaceID: r.WorkspaceID, WorkspaceName: r.WorkspaceName}
	}
	return out, nil
}

// Rename tells a connected browser its new name; it does nothing for one
// that is not connected.
func (h *Hub) Rename(userID, browserID, name string) {
	if c := h.browser(userID, browserID); c != nil {
		c.setName(name)
		c.enqueue(encode(browserMsg{Type: TypeBrowser, Name: name}))
	}
}

// Send queues one message (encoded as JSON) for a connected browser. It never
// blocks: a browser whose queue is full is closed as a slow consumer, and
// Send then reports ErrNotConnected.
func (h *Hub) Send(userID, browserID string, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("send to browser: %w", err)
	}
	c := h.browser(userID, browserID)
	if c == nil || !c.enqueue(b) {
		return ErrNotConnected
	}
	return nil
}

// OpenSite is a shared site a browser has open.
type OpenSite struct {
	Origin   string    `json:"origin"`
	LastUsed time.Time `json:"lastUsed"`
	Tabs     int       `json:"tabs"`
}

// BrowserInfo is a snapshot of one connected browser.
type BrowserInfo struct {
	BrowserID   string     `json:"browserId"`
	Name        string     `json:"name"`
	Version     string     `json:"version"`
	ConnectedAt time.Time  `json:"connectedAt"`
	LastPing    *time.Time `json:"lastPing"`
	OpenSites   []OpenSite `json:"openSites"`
}

// Connected lists a person's connected browsers, most recently connected first.
func (h *Hub) Connected(userID string) []BrowserInfo {
	conns := h.browsersOf(userID)
	out := make([]BrowserInfo, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConnectedAt.After(out[j].ConnectedAt) })
	return out
}

// Pick returns the connected browser of userID whose tab of origin was used
// most recently, and when; ok is false when no connected browser has it open.
func (h *Hub) Pick(userID, origin string) (browserID string, lastUsed time.Time, ok bool) {
	for _, c := range h.browsersOf(userID) {
		if s, open := c.openSite(origin); open && (!ok || s.LastUsed.After(lastUsed)) {
			browserID, lastUsed, ok = c.browserID, s.LastUsed, true
		}
	}
	return browserID, lastUsed, ok
}
