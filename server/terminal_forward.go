package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// Terminal forwarding between instances (docs/PROTOCOL-terminals.md,
// "Across instances"). A daemon's socket, and so its sessions, live on the
// instance that holds it (instance_links says which); a viewer may reach
// any instance. The viewer's instance looks the session up on the holder,
// dials the holder's internal viewer route and relays the viewer's frames
// both ways unchanged. The holder serves that internal socket as it serves
// a viewer of its own (relay.ServeViewer), so acknowledgements, the 256 KiB
// frame cap, redraw on backpressure and the session's end behave exactly
// as on one instance: the viewer's own acks reach the holder's window.
//
// When the holder goes away (killed, or shut down), the viewer is told the
// machine is offline and its socket stays open until the session is found
// again — its daemon reconnects through the balancer to another instance —
// or is gone for good; the socket is then closed, and the page dials again
// (a fresh ticket, a fresh attach: as after a server restart).

// The internal terminal routes.
const (
	internalTermSession  = "/internal/v1/terminals/session"  // ?user=&id= → relay.SessionView
	internalTermSessions = "/internal/v1/terminals/sessions" // ?machine= → {"sessions": [...]}
	internalTermViewer   = "/internal/v1/terminals/viewer"   // ?user=&session=&watch= → WebSocket
)

// forwardReadLimit bounds one message from a holder: a snapshot with its
// history is the largest, at most wire.MaxSnapshot and its header.
const forwardReadLimit = wire.MaxFromDaemon

// forwardPoll is how often a viewer whose holder went away looks for its
// session again.
const forwardPoll = 200 * time.Millisecond

// closeMoved is the close code a forwarded viewer's socket ends with when
// its session is found again elsewhere: dial again (1012, service restart).
const closeMoved = websocket.CloseServiceRestart

// termForwards tracks the forwarded viewer sockets, which Fiber does not
// (they are hijacked), so Shutdown can wait for them.
type termForwards struct {
	wg sync.WaitGroup
}

var upgrader = websocket.Upgrader{ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10}

// terminalRoutes mounts the internal terminal routes.
func (s *Server) terminalRoutes() {
	s.HandleInternal("GET "+internalTermSession, http.HandlerFunc(s.internalTermSession))
	s.HandleInternal("GET "+internalTermSessions, http.HandlerFunc(s.internalTermSessions))
	s.HandleInternal("GET "+internalTermViewer, http.HandlerFunc(s.internalTermViewer))
}

// stopping answers 503 while this instance shuts down: its hub no longer
// serves viewers, and its daemons are about to dial another instance.
func (s *Server) stopping(w http.ResponseWriter) bool {
	if s.ctx.Err() == nil {
		return false
	}
	writeInternalError(w, http.StatusServiceUnavailable, codeUnavailable, "This instance is shutting down.")
	return true
}

func (s *Server) internalTermSession(w http.ResponseWriter, r *http.Request) {
	if s.stopping(w) {
		return
	}
	q := r.URL.Query()
	sess, err := s.relay.Session(q.Get("user"), q.Get("id"))
	if err != nil {
		writeInternalError(w, http.StatusNotFound, codeNotFound, "No such session on this instance.")
		return
	}
	writeInternalJSON(w, sess)
}

func (s *Server) internalTermSessions(w http.ResponseWriter, r *http.Request) {
	if s.stopping(w) {
		return
	}
	writeInternalJSON(w, map[string]any{"sessions": s.relay.Sessions(r.URL.Query().Get("machine"))})
}

// internalTermViewer serves a viewer forwarded by another instance: the
// other instance redeemed the ticket; here the socket is a viewer like any.
func (s *Server) internalTermViewer(w http.ResponseWriter, r *http.Request) {
	if s.stopping(w) {
		return
	}
	q := r.URL.Query()
	user, sid, watch := q.Get("user"), q.Get("session"), q.Get("watch") == "1"
	if _, err := s.relay.Session(user, sid); err != nil {
		writeInternalError(w, http.StatusNotFound, codeNotFound, "No such session on this instance.")
		return
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	// The viewer's instance follows its sign-in; the hub's Close ends this
	// socket when this instance shuts down.
	err = s.relay.ServeViewer(context.Background(), user, sid, watch, conn)
	_ = conn.Close()
	s.internalLog(r.Context()).Debug("forwarded viewer closed", "session", sid, "err", err)
}

func writeInternalJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// decodePeer decodes a 2xx answer into out; any other is a *cluster.PeerError.
func decodePeer(resp *http.Response, out any) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, cluster.MaxResponse))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e errorBody
		_ = json.Unmarshal(body, &e)
		return &cluster.PeerError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	return json.Unmarshal(body, out)
}

// remoteSession is a session another instance holds.
type remoteSession struct {
	relay.SessionView
	holder string // the instance holding its daemon
}

// findSession finds one of userID's sessions: here, or on an instance
// holding one of the person's daemons. errHolderGone means a daemon of the
// person is held by an instance that cannot be asked (it died): the
// session may be there.
func (s *Server) findSession(ctx context.Context, userID, id string) (remoteSession, error) {
	if v, err := s.relay.Session(userID, id); err == nil {
		if v.Online || !s.multi() {
			return remoteSession{SessionView: v, holder: s.id}, nil
		}
		// Kept offline here since its daemon left: it may be on another instance now.
		if h, err := s.machineHolder(ctx, userID, v.MachineID); err == nil && h != "" && h != s.id {
			if rv, err := s.peerSession(ctx, h, userID, id); err == nil {
				return remoteSession{SessionView: rv, holder: h}, nil
			}
		}
		return remoteSession{SessionView: v, holder: s.id}, nil
	}
	if !s.multi() {
		return remoteSession{}, relay.ErrNoSession
	}
	links, err := s.registry.Links(ctx, cluster.LinkMachine, userID)
	if err != nil {
		return remoteSession{}, err
	}
	asked := map[string]bool{s.id: true}
	var gone error
	for _, l := range links {
		if asked[l.InstanceID] {
			continue
		}
		asked[l.InstanceID] = true
		v, err := s.peerSession(ctx, l.InstanceID, userID, id)
		switch {
		case err == nil:
			return remoteSession{SessionView: v, holder: l.InstanceID}, nil
		case errors.Is(err, relay.ErrNoSession):
		case errors.Is(err, cluster.ErrPeerGone):
			gone = errHolderGone
		default:
			return remoteSession{}, err
		}
	}
	if gone != nil {
		return remoteSession{}, gone
	}
	return remoteSession{}, relay.ErrNoSession
}

// errHolderGone: the instance holding a daemon cannot be reached.
var errHolderGone = errors.New("server: the instance holding the daemon is gone")

// peerSession asks instance id for one session.
func (s *Server) peerSession(ctx context.Context, id, userID, sessionID string) (relay.SessionView, error) {
	var v relay.SessionView
	path := internalTermSession + "?" + url.Values{"user": {userID}, "id": {sessionID}}.Encode()
	err := s.peerGet(ctx, id, path, &v)
	var pe *cluster.PeerError
	if errors.As(err, &pe) && pe.Status == http.StatusNotFound {
		return v, relay.ErrNoSession
	}
	if errors.As(err, &pe) && pe.Status == http.StatusServiceUnavailable {
		return v, fmt.Errorf("instance %s: %w (shutting down)", id, cluster.ErrPeerGone)
	}
	return v, err
}

// peerGet gets path from instance id into out.
func (s *Server) peerGet(ctx context.Context, id, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := s.Peers().NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	resp, err := s.Peers().Do(ctx, id, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodePeer(resp, out)
}

// machineHolder is the instance holding a machine's daemon ("" for none).
func (s *Server) machineHolder(ctx context.Context, userID, machineID string) (string, error) {
	if s.relay.Online(machineID) {
		return s.id, nil
	}
	if !s.multi() {
		return "", nil
	}
	links, err := s.registry.Links(ctx, cluster.LinkMachine, userID)
	if err != nil {
		return "", err
	}
	for _, l := range links {
		if l.LinkID == machineID && l.InstanceID != s.id {
			return l.InstanceID, nil
		}
	}
	return "", nil
}

// machineSessions lists a machine's sessions wherever its daemon is held;
// an unreachable holder lists none (the machine shows offline).
func (s *Server) machineSessions(ctx context.Context, userID, machineID string) []relay.SessionView {
	local := s.relay.Sessions(machineID)
	holder, err := s.machineHolder(ctx, userID, machineID)
	if err != nil || holder == "" || holder == s.id {
		return local
	}
	var out struct {
		Sessions []relay.SessionView `json:"sessions"`
	}
	if err := s.peerGet(ctx, holder, internalTermSessions+"?"+url.Values{"machine": {machineID}}.Encode(), &out); err != nil {
		s.opts.Logger.Warn("list a machine's sessions on its instance", "machine", machineID, "instance", holder, "err", err)
		return local
	}
	return out.Sessions
}

// onlineElsewhere is the set of userID's machines whose daemons other
// instances hold.
func (s *Server) onlineElsewhere(ctx context.Context, userID string) map[string]bool {
	out := map[string]bool{}
	if !s.multi() {
		return out
	}
	links, err := s.registry.Links(ctx, cluster.LinkMachine, userID)
	if err != nil {
		s.opts.Logger.Warn("read machine links", "err", err)
		return out
	}
	for _, l := range links {
		if l.InstanceID != s.id {
			out[l.LinkID] = true
		}
	}
	return out
}

// forwardViewer relays a viewer socket at this instance to the session's
// holder until the viewer leaves, ctx ends (its sign-in ended: closed with
// relay.CloseSignedOut), this server shuts down, or the session is gone.
func (s *Server) forwardViewer(ctx context.Context, g viewerGrant, browser *websocket.Conn) error {
	s.termFwd.wg.Add(1)
	defer s.termFwd.wg.Done()
	f := &viewerForward{s: s, g: g, browser: browser, up: make(chan frame, 64), gone: make(chan struct{}), quit: make(chan struct{})}
	go f.readBrowser()
	defer func() { close(f.quit); _ = browser.Close(); <-f.gone }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return f.run(ctx)
}

// frame is one WebSocket message.
type frame struct {
	typ  int
	data []byte
}

// viewerForward is one forwarded viewer. Its browser socket has one reader
// (readBrowser) and one writer at a time: the holder's pump while attached,
// run otherwise.
type viewerForward struct {
	s       *Server
	g       viewerGrant // machineID owned by run
	browser *websocket.Conn
	up      chan frame    // from the browser, for the holder
	gone    chan struct{} // closed when the browser's socket fails
	quit    chan struct{} // closed when the forward ends: nobody reads up any more
}

// readBrowser reads the viewer's frames for the holder until its socket
// fails; the holder validates them.
func (f *viewerForward) readBrowser() {
	defer close(f.gone)
	f.browser.SetReadLimit(wire.MaxFromViewer) // as the holder reads it: a paste of wire.MaxInput passes
	extend := func() { _ = f.browser.SetReadDeadline(time.Now().Add(3 * relay.DefaultPing)) }
	f.browser.SetPongHandler(func(string) error { extend(); return nil })
	extend()
	for {
		typ, p, err := f.browser.ReadMessage()
		if err != nil {
			return
		}
		extend()
		select {
		case f.up <- frame{typ, p}:
		case <-f.quit:
			return
		}
	}
}

func (f *viewerForward) run(ctx context.Context) error {
	ping := time.NewTicker(relay.DefaultPing)
	defer ping.Stop()
	lost := false // the holder went away: the viewer was told the machine is offline
	var refused *holderRefused
	for {
		sess, err := f.s.findSession(ctx, f.g.userID, f.g.sessionID)
		switch {
		case ctx.Err() != nil:
			return f.closeFor(ctx)
		case err == nil && !lost && sess.holder != f.s.id:
			f.g.machineID = sess.MachineID
			aerr := f.attach(ctx, sess.holder, ping)
			switch {
			case errors.Is(aerr, errViewerGone):
				return aerr
			case errors.As(aerr, &refused):
				return f.close(refused.code, refused.text)
			case ctx.Err() != nil:
				return f.closeFor(ctx)
			case aerr == nil: // the holder ended the viewer: the session ended, or the viewer fell too far behind
				return f.close(closeMoved, "dial again")
			}
			f.s.opts.Logger.Info("forwarded viewer lost its instance; waiting for the daemon", "session", f.g.sessionID, "instance", sess.holder, "err", aerr)
			lost = true
			if err := f.writeBrowser(frame{websocket.TextMessage, []byte(`{"type":"status"}`)}); err != nil {
				return errViewerGone
			}
			continue
		case err == nil: // here, or found again after its holder went away: the page dials again
			return f.close(closeMoved, "dial again")
		case errors.Is(err, relay.ErrNoSession) && (!lost || f.linkedElsewhere(ctx)):
			return f.close(closeMoved, "dial again") // gone: the page's next ticket says so
		case errors.Is(err, relay.ErrNoSession), errors.Is(err, errHolderGone):
			if f.revoked(ctx) {
				return f.close(closeMoved, "dial again")
			}
		default:
			f.s.opts.Logger.Warn("look up a forwarded viewer's session", "session", f.g.sessionID, "err", err)
		}
		if err := f.wait(ctx, ping); err != nil {
			return err
		}
	}
}

// holderRefused is the holder's closing of the viewer with an application's
// close code (4000–4999: relay.CloseTooManyViewers today), which the viewer
// gets as the holder gave it: only the holder knows what such a code means,
// and the viewer's page acts on the code (CLOSE_TOO_MANY_VIEWERS waits and
// dials again). The holder's other endings (the session ended, the viewer
// fell too far behind) are the forward's own "dial again".
type holderRefused struct {
	code int
	text string
}

func (e *holderRefused) Error() string {
	return fmt.Sprintf("the holder refused the viewer: %d %s", e.code, e.text)
}

// errViewerGone: the viewer's own socket ended.
var errViewerGone = errors.New("server: the viewer left")

// linkedElsewhere reports whether the session's machine is linked on a
// living instance: it is back, without the session.
func (f *viewerForward) linkedElsewhere(ctx context.Context) bool {
	h, err := f.s.machineHolder(ctx, f.g.userID, f.g.machineID)
	if err != nil || h == "" {
		return false
	}
	if h == f.s.id {
		return true
	}
	_, ok, _ := f.s.Peers().Address(ctx, h)
	return ok
}

// revoked reports whether the session's machine is revoked or deleted.
func (f *viewerForward) revoked(ctx context.Context) bool {
	ms, err := f.s.opts.DB.Machines(ctx, f.g.userID)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.ID == f.g.machineID {
			return false
		}
	}
	return true
}

// wait waits forwardPoll while the viewer is offline, pinging it.
func (f *viewerForward) wait(ctx context.Context, ping *time.Ticker) error {
	t := time.NewTimer(forwardPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return f.closeFor(ctx)
		case <-f.gone:
			return errViewerGone
		case <-f.up: // keystrokes for an offline machine are dropped, as on one instance
		case <-ping.C:
			_ = f.browser.WriteControl(websocket.PingMessage, nil, time.Now().Add(relay.DefaultWriteWait))
		case <-t.C:
			return nil
		}
	}
}

// attach relays between the browser and the holder until one of them ends.
// It returns nil when the holder closed the viewer in good order, and an
// error when the holder could not be reached or its socket broke.
func (f *viewerForward) attach(ctx context.Context, holder string, ping *time.Ticker) error {
	q := url.Values{"user": {f.g.userID}, "session": {f.g.sessionID}}
	if f.g.watchOnly {
		q.Set("watch", "1")
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	up, resp, err := f.s.Peers().DialWebSocket(dctx, holder, internalTermViewer+"?"+q.Encode(), nil)
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil // gone since the lookup
		}
		return fmt.Errorf("dial %s: %w", holder, err)
	}
	defer up.Close()
	up.SetReadLimit(forwardReadLimit)
	down := make(chan error, 1)
	go func() { down <- f.pumpDown(up) }()
	for {
		select {
		case err := <-down:
			return err
		case <-ctx.Done():
			_ = up.Close()
			<-down
			return nil
		case <-f.gone:
			_ = up.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			_ = up.Close()
			<-down
			return errViewerGone
		case m := <-f.up:
			_ = up.SetWriteDeadline(time.Now().Add(relay.DefaultWriteWait))
			if err := up.WriteMessage(m.typ, m.data); err != nil {
				_ = up.Close()
				<-down
				return err
			}
		case <-ping.C:
			_ = f.browser.WriteControl(websocket.PingMessage, nil, time.Now().Add(relay.DefaultWriteWait))
		}
	}
}

// pumpDown copies the holder's frames to the browser. The holder paces them
// by the viewer's acks, so a blocked write here holds at most its window.
func (f *viewerForward) pumpDown(up *websocket.Conn) error {
	extend := func() { _ = up.SetReadDeadline(time.Now().Add(3 * relay.DefaultPing)) }
	up.SetPingHandler(func(d string) error {
		extend()
		return up.WriteControl(websocket.PongMessage, []byte(d), time.Now().Add(relay.DefaultWriteWait))
	})
	extend()
	for {
		typ, p, err := up.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code >= 4000 && ce.Code <= 4999 {
			return &holderRefused{code: ce.Code, text: ce.Text} // the viewer is told as the holder said
		}
		if errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure {
			return nil
		}
		if err != nil {
			return err
		}
		extend()
		if err := f.writeBrowser(frame{typ, p}); err != nil {
			return errViewerGone
		}
	}
}

func (f *viewerForward) writeBrowser(m frame) error {
	_ = f.browser.SetWriteDeadline(time.Now().Add(relay.DefaultWriteWait))
	return f.browser.WriteMessage(m.typ, m.data)
}

// closeFor closes the browser's socket as ctx's end says: the sign-in ended
// (relay.CloseSignedOut), or this server is shutting down (dial again).
func (f *viewerForward) closeFor(ctx context.Context) error {
	if f.s.ctx.Err() != nil {
		return f.close(websocket.CloseGoingAway, "server shutting down")
	}
	return f.close(relay.CloseSignedOut, "signed out")
}

// close tells the viewer why its socket ends and closes it.
func (f *viewerForward) close(code int, text string) error {
	_ = f.browser.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select { // the viewer's answering close ends its reader
	case <-f.gone:
	case <-t.C:
	}
	return nil
}

// machineLinkedElsewhere hears another instance's machine.online: the hub
// here forgets the sessions it kept offline since that daemon left, so their
// viewers dial again and are forwarded to the new holder instead of waiting
// here for a daemon that will not come back to this instance.
func (s *Server) machineLinkedElsewhere(ev liveSignal) {
	if ev.Type != relay.EventMachineOnline {
		return
	}
	var d struct {
		Machine struct {
			ID string `json:"id"`
		} `json:"machine"`
	}
	if json.Unmarshal(ev.Data, &d) != nil || d.Machine.ID == "" {
		return
	}
	s.relay.Forget(d.Machine.ID)
}
