package bridge

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/sitetools"
)

// conn is one browser's socket. The goroutine in Serve is its only reader;
// writeLoop is its only writer, running only while there is something to
// write (an idle browser then costs one goroutine, not two: issue 16);
// everyone else hands messages to enqueue.
type conn struct {
	h    *Hub   // static
	sock Socket // static; Close and WriteControl from any goroutine
	// userID is static; browserID and version are set once by the reader
	// before the conn is attached to the hub, and static after.
	userID, browserID, version string
	connectedAt                time.Time // static after hello

	out        outQueue      // bounded outbound queue (queue.go); drained by writeLoop only
	replies    atomic.Int32  // replies and pushes in out, bounded by QueueSize
	quit       chan struct{} // closed by shut
	readerDone chan struct{} // closed when the reader has stopped
	// writing is set while a writeLoop runs (kick starts one), and stays
	// set once one has finished the socket.
	writing   atomic.Bool
	finished  chan struct{} // closed by the writeLoop that finished the socket
	once      sync.Once
	closeCode int         // written in shut before quit closes
	closeText string      // written in shut before quit closes
	kill      *time.Timer // written in shut before quit closes; cuts the connection if closing stalls

	ready    bool         // owned by the reader: hello accepted
	lastPing atomic.Int64 // unix nanoseconds of the last ping, 0 before any

	mu     sync.Mutex
	name   string              // guarded by mu
	shared map[string]bool     // guarded by mu: origins the person shares
	open   map[string]OpenSite // guarded by mu: shared origins this browser has open
	// calls are the calls sent to this browser and not yet answered; once
	// callsClosed is set (the socket ended) no call is added. Guarded by mu.
	calls       map[string]*pendingCall
	callsClosed bool
	// inflight counts the call slots held: calls pending, and cancelled
	// calls whose call.cancel is still queued (queue.go). Guarded by mu.
	inflight int
	// approvals is the coalesced approvals message waiting in out, nil when
	// none is queued (queue.go). Guarded by mu.
	approvals *ApprovalsMsg
	// cancelled remembers the calls this socket cancelled last (queue.go).
	// Guarded by mu.
	cancelled recentIDs

	// pace holds back announcements beyond the socket's pace (pace.go).
	pace pacer
	// seq is held while an announcement is handed to the catalog, and while
	// the reader handles a document.used or document.gone or runs what is
	// held before a call.result, so those keep the order the browser sent
	// them in.
	seq sync.Mutex
	// drains counts the running drain of held announcements; Serve waits.
	drains sync.WaitGroup
}

// Serve speaks the extension protocol on sock for userID (already
// authenticated by the caller) until the socket ends, or ctx does (the
// sign-in that opened it ended: closed with CloseSignedOut). It returns only
// after both its reader and its writer have stopped, so the caller may then
// recycle the socket.
func (h *Hub) Serve(ctx context.Context, sock Socket, userID string) {
	c := &conn{
		h: h, sock: sock, userID: userID,
		quit: make(chan struct{}), readerDone: make(chan struct{}),
		finished: make(chan struct{}),
	}
	if !h.enter(c) {
		sock.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseGoingAway, "server shutting down"), time.Now().Add(h.opts.CloseGrace))
		return // returning ends the connection
	}
	defer h.leave(c)
	stop := context.AfterFunc(ctx, func() { c.shut(CloseSignedOut, "signed out") })
	defer stop()
	c.readLoop() // returns once the conn is shutting: a writer finishes it
	close(c.readerDone)
	<-c.finished
	c.stopPace() // before leave forgets the browser's documents
	c.failCalls("", sitetools.ErrBrowserGone)
	if c.ready {
		c.goodbye()
	}
}

func (c *conn) goodbye() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.h.opts.DB.TouchBrowser(ctx, c.userID, c.browserID); err != nil {
		c.h.opts.Logger.Warn("browser disconnect", "user", c.userID, "browser", c.browserID, "err", err)
	}
	c.h.opts.Logger.Info("browser disconnected", "user", c.userID, "browser", c.browserID, "code", c.closeCode, "reason", c.closeText)
}

// readLoop reads frames until the socket fails or the conn is shutting;
// then it keeps reading (and dropping) until the browser answers the close
// or CloseGrace passes.
func (c *conn) readLoop() {
	c.sock.SetReadLimit(c.h.opts.MaxMessage)
	for !c.closing() {
		c.sock.SetReadDeadline(time.Now().Add(c.h.opts.Idle))
		typ, data, err := c.sock.ReadMessage()
		if err != nil {
			c.shut(readCloseCode(err))
			return
		}
		if typ != websocket.TextMessage {
			c.fail(CloseUnsupportedData, protoErr(ErrCodeInvalidMessage, "", "Binary frames are not part of the protocol; send JSON text frames."))
			break
		}
		c.route(data)
	}
	c.sock.SetReadDeadline(time.Now().Add(c.h.opts.CloseGrace))
	for {
		if _, _, err := c.sock.ReadMessage(); err != nil {
			return
		}
	}
}

// readCloseCode picks the close code for a failed read.
func readCloseCode(err error) (int, string) {
	var ne net.Error
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		return CloseTooBig, "message too big"
	case errors.As(err, &ne) && ne.Timeout():
		return CloseIdle, "idle"
	}
	return CloseNormal, "closed by the browser"
}

func (c *conn) closing() bool {
	select {
	case <-c.quit:
		return true
	default:
		return false
	}
}

// route handles one text frame where it costs the reader's stack least
// (offstack.go): the hello and the catalog's frames on a short-lived
// goroutine the reader waits for (so frames are still handled one at a
// time, in order), a ping and a call's frames on the reader.
func (c *conn) route(frame []byte) {
	if c.ready {
		if id, ok := pingID(frame); ok {
			c.ping(id)
			return
		}
		if !offReader(frame) {
			c.handle(frame)
			return
		}
	}
	OffStack(func() { c.handle(frame) })
}

// ping answers a ping with the server's clock.
func (c *conn) ping(id string) {
	now := time.Now()
	c.lastPing.Store(now.UnixNano())
	c.enqueue(encodePong(id, now.UnixMilli()))
}

// handle acts on one text frame. A bug while handling one ends only this
// socket (1011), never the server.
func (c *conn) handle(frame []byte) {
	defer func() {
		if r := recover(); r != nil {
			c.h.opts.Logger.Error("extension frame handler panicked", "user", c.userID, "browser", c.browserID, "panic", r)
			c.shut(CloseInternal, "internal error")
		}
	}()
	in, err := Decode(frame)
	if err != nil {
		pe := err.(*ProtocolError)
		if !c.ready {
			c.fail(CloseHelloExpected, pe)
			return
		}
		c.sendError(pe)
		return
	}
	if !c.ready {
		if in.Type != TypeHello {
			c.fail(CloseHelloExpected, protoErr(ErrCodeHelloExpected, in.ID, "The first message must be a hello (docs/PROTOCOL.md)."))
			return
		}
		c.hello(in)
		return
	}
	switch in.Type {
	case TypeHello:
		c.sendError(protoErr(ErrCodeHelloRepeated, in.ID, "This socket has already said hello; open a new socket to start over."))
	case TypePing:
		c.ping(in.ID)
	case TypeSitesOpen:
		c.setOpen(in)
	case TypeToolsAnnounce:
		c.announce(in)
	case TypeDocumentUsed:
		c.documentUsed(in)
	case TypeDocumentGone:
		c.documentGone(in)
	case TypeCallDispatched:
		c.dispatched(in)
	case TypeCallResult:
		c.result(in)
	}
}

// hello checks the protocol version, records the browser, attaches it to the
// hub (replacing an older socket of the same browser) and sends the welcome.
func (c *conn) hello(in *Inbound) {
	hi := in.Hello
	if hi.MinProtocol > ProtocolVersion || hi.Protocol < ProtocolVersion {
		e := protoErr(ErrCodeUnsupported, in.ID, "This server speaks protocol %d; the extension speaks %d to %d. Update the extension or the server.", ProtocolVersion, hi.MinProtocol, hi.Protocol)
		c.enqueue(encode(errorMsg{Type: TypeError, Code: e.Code, Message: e.Message, Ref: e.Ref, Protocol: ProtocolVersion}))
		c.shut(CloseUnsupportedProtocol, "unsupported protocol")
		return
	}
	row, err := c.h.opts.DB.SeeBrowser(c.h.ctx, c.userID, hi.BrowserID, hi.Name, hi.Version)
	if err != nil {
		c.h.opts.Logger.Error("browser hello", "user", c.userID, "err", err)
		c.shut(CloseInternal, "internal error")
		return
	}
	c.browserID, c.version, c.connectedAt, c.name = row.BrowserID, row.Version, time.Now(), row.Name
	if !c.welcome(in.ID) {
		return
	}
	c.ready = true
	c.h.opts.Logger.Info("browser connected", "user", c.userID, "browser", c.browserID, "version", c.version)
	c.changed(ChangeConnected, "")
}

func (c *conn) welcome(ref string) bool {
	p := c.h.personOf(c.userID)
	p.order.Lock()
	old := c.h.attach(p, c)
	sites, err := c.h.sites(c.h.ctx, c.userID)
	if err == nil {
		c.setShared(sites)
		c.enqueue(encode(welcomeMsg{
			Type: TypeWelcome, ID: ref, Protocol: ProtocolVersion, BrowserID: c.browserID, Name: c.name,
			SharedSites: sites, Limits: c.h.limits(),
		}))
	}
	p.order.Unlock()
	if old != nil {
		old.shut(CloseReplaced, "replaced by a newer connection")
	}
	if err != nil {
		c.h.opts.Logger.Error("browser welcome", "user", c.userID, "err", err)
		c.shut(CloseInternal, "internal error")
		return false
	}
	return true
}

func (h *Hub) limits() Limits {
	return Limits{
		MaxMessageBytes: h.opts.MaxMessage, PingSeconds: int(h.opts.PingInterval / time.Second), IdleSeconds: int(h.opts.Idle / time.Second),
		CallTimeoutMs: h.opts.CallTimeout.Milliseconds(), MaxResultBytes: sitetools.MaxResultBytes,
		MaxToolsPerSite: sitetools.MaxToolsPerSite, MaxDescriptorBytes: sitetools.MaxDescriptorBytes,
		MaxAnnouncementBytes: sitetools.MaxAnnouncementBytes, MaxTitleBytes: sitetools.MaxTitleBytes,
		MaxDescriptionBytes: sitetools.MaxDescriptionBytes,
	}
}

// fail answers a protocol error and closes with code.
func (c *conn) fail(code int, e *ProtocolError) {
	c.sendError(e)
	c.shut(code, e.Code)
}

func (c *conn) sendError(e *ProtocolError) {
	c.enqueue(encode(errorMsg{Type: TypeError, Code: e.Code, Message: e.Message, Ref: e.Ref}))
}

// enqueue hands a reply or push to the writer without ever blocking. A full
// queue means the browser does not read fast enough: it is closed as a slow
// consumer.
func (c *conn) enqueue(msg []byte) bool { return c.put(outbound{data: msg, kind: outReply}) }

// shut starts closing the socket with code; the first call wins.
func (c *conn) shut(code int, text string) {
	c.once.Do(func() {
		c.closeCode, c.closeText = code, text
		c.kill = time.AfterFunc(2*c.h.opts.CloseGrace, c.cut)
		close(c.quit)
		c.kick()
	})
}

// kick starts the writer unless one runs.
func (c *conn) kick() {
	if c.writing.CompareAndSwap(false, true) {
		go c.writeLoop()
	}
}

// writeLoop is the socket's only writer: it writes what is queued and ends
// when the queue is empty. Once the conn is shutting it sends what is
// queued (unless the browser is a slow consumer), the close frame, waits
// for the reader to see the browser's answer, and cuts the connection.
func (c *conn) writeLoop() {
	for {
		if c.closing() {
			c.finish()
			close(c.finished) // writing stays set: no writer starts again
			return
		}
		if m, ok := c.out.pop(); ok {
			if msg := c.take(m); msg != nil && !c.write(msg) {
				c.shut(CloseNormal, "write failed")
			}
			continue
		}
		c.writing.Store(false)
		// A message queued (or a shut) after pop found nothing kicked no
		// writer, as this one still ran: look again.
		if c.out.len() == 0 && !c.closing() {
			return
		}
		if !c.writing.CompareAndSwap(false, true) {
			return // the kick of that message started another
		}
	}
}

func (c *conn) write(msg []byte) bool {
	c.sock.SetWriteDeadline(time.Now().Add(c.h.opts.WriteTimeout))
	return c.sock.WriteMessage(websocket.TextMessage, msg) == nil
}

func (c *conn) finish() {
	defer c.kill.Stop()
	if c.closeCode != ClosePolicy {
		c.flush()
	}
	grace := time.NewTimer(c.h.opts.CloseGrace)
	defer grace.Stop()
	c.sock.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(c.closeCode, c.closeText), time.Now().Add(c.h.opts.CloseGrace))
	select {
	case <-c.readerDone:
	case <-grace.C:
	}
	c.cut()
}

// cut ends the connection: a read or write blocked on it fails at once.
func (c *conn) cut() {
	c.sock.NetConn().SetDeadline(time.Unix(1, 0))
	c.sock.Close()
}

// flush writes what is already queued, without waiting for more.
func (c *conn) flush() {
	for {
		m, ok := c.out.pop()
		if !ok {
			return
		}
		if msg := c.take(m); msg != nil && !c.write(msg) {
			return
		}
	}
}

func (c *conn) setName(name string) {
	c.mu.Lock()
	c.name = name
	c.mu.Unlock()
}

// setShared records the person's shared origins and forgets open sites that
// are no longer shared.
func (c *conn) setShared(sites []Site) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shared = make(map[string]bool, len(sites))
	for _, s := range sites {
		c.shared[s.Origin] = true
	}
	for origin := range c.open {
		if !c.shared[origin] {
			delete(c.open, origin)
		}
	}
}

// setOpen replaces what this browser has open with the shared sites of a
// sites.open message, and answers site_not_shared for the others.
func (c *conn) setOpen(in *Inbound) {
	now := time.Now()
	var refused []string
	c.mu.Lock()
	open := make(map[string]OpenSite, len(in.SitesOpen.Sites))
	for _, s := range in.SitesOpen.Sites {
		if !c.shared[s.Origin] {
			refused = append(refused, s.Origin)
			continue
		}
		used := time.UnixMilli(s.LastUsed)
		if used.After(now.Add(maxLastUsedSkew)) {
			used = now
		}
		if prev, dup := open[s.Origin]; !dup || used.After(prev.LastUsed) {
			open[s.Origin] = OpenSite{Origin: s.Origin, LastUsed: used.UTC(), Tabs: s.Tabs}
		}
	}
	moved := !sameTabs(c.open, open)
	c.open = open
	c.mu.Unlock()
	if moved {
		c.changed(ChangeOpen, "")
	}
	if len(refused) > 0 {
		c.sendError(protoErr(ErrCodeSiteNotShared, in.ID, "Not shared, so not recorded: %s. Share a site before announcing it.", clip(strings.Join(refused, ", "))))
	}
}

// sameTabs reports whether two open-site lists name the same sites with the
// same tab counts (when each was last used aside).
func sameTabs(a, b map[string]OpenSite) bool {
	if len(a) != len(b) {
		return false
	}
	for origin, s := range a {
		if t, ok := b[origin]; !ok || t.Tabs != s.Tabs {
			return false
		}
	}
	return true
}

func (c *conn) openSite(origin string) (OpenSite, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.open[origin]
	return s, ok
}

func (c *conn) info() BrowserInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := BrowserInfo{BrowserID: c.browserID, Name: c.name, Version: c.version, ConnectedAt: c.connectedAt.UTC(), OpenSites: []OpenSite{}}
	if ns := c.lastPing.Load(); ns != 0 {
		t := time.Unix(0, ns).UTC()
		b.LastPing = &t
	}
	for _, s := range c.open {
		b.OpenSites = append(b.OpenSites, s)
	}
	return b
}
