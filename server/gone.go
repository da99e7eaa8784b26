package server

import (
	"crypto/rand"
	"net"
	"net/http"
	"sync"
)

// Under Fiber a client that closes its connection does not cancel the
// request's context (fasthttp reads nothing while a handler runs), and the
// MCP SDK keeps a call running after its stream's request ends. So every MCP
// POST's connection is watched for the peer closing it (connWatch), and the
// calls that POST carries learn of it through goneHeader.

// goneHeader names the watch of the POST that carries a call. The server
// sets it on every MCP POST (overwriting any a client sent); the call's
// handler reads it from the request headers the SDK passes along.
const goneHeader = "Tabbridge-Conn-Watch"

// goneWatches maps each watched MCP POST to the channel closed when its
// client goes away.
type goneWatches struct {
	m sync.Map // watch id → chan struct{}

	mu sync.Mutex
	// calls maps an MCP session id to the calls running in it, each with
	// the agent token it came with and what ends it; guarded by mu.
	calls map[string]map[*sessionCall]struct{}
}

// sessionCall is one call running in an MCP session.
type sessionCall struct {
	tokenID string
	end     func() // the agent went away
}

// inSession records a call running in session sid until the returned
// function is called. The SDK's DELETE waits for running calls before it
// ends a session, so endSession must end them first.
func (g *goneWatches) inSession(sid, tokenID string, end func()) (done func()) {
	c := &sessionCall{tokenID: tokenID, end: end}
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]map[*sessionCall]struct{}{}
	}
	if g.calls[sid] == nil {
		g.calls[sid] = map[*sessionCall]struct{}{}
	}
	g.calls[sid][c] = struct{}{}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.calls[sid], c)
		if len(g.calls[sid]) == 0 {
			delete(g.calls, sid)
		}
		g.mu.Unlock()
	}
}

// endSession ends the calls running in session sid for an agent that asked
// (DELETE) to end it with the token that opened them.
func (g *goneWatches) endSession(sid, tokenID string) {
	g.mu.Lock()
	var ends []func()
	for c := range g.calls[sid] {
		if c.tokenID == tokenID {
			ends = append(ends, c.end)
		}
	}
	g.mu.Unlock()
	for _, end := range ends {
		end()
	}
}

// watch starts watching the connection behind r, marks r with the watch's
// id, and returns the function that stops watching (call it before the
// handler returns: the connection is the server's again afterwards). A
// request whose connection cannot be watched gets no id.
func (g *goneWatches) watch(r *http.Request) (stop func()) {
	r.Header.Del(goneHeader)
	cg, ok := r.Context().(interface{ Conn() net.Conn })
	if !ok || cg.Conn() == nil {
		return func() {}
	}
	gone := make(chan struct{})
	w, ok := watchConn(cg.Conn(), func() { close(gone) })
	if !ok {
		return func() {}
	}
	id := rand.Text()
	g.m.Store(id, gone)
	r.Header.Set(goneHeader, id)
	return func() {
		w.stop()
		g.m.Delete(id)
	}
}

// gone returns the channel closed when the client behind the watch id goes
// away, or nil for an unknown id.
func (g *goneWatches) gone(id string) <-chan struct{} {
	if id == "" {
		return nil
	}
	if ch, ok := g.m.Load(id); ok {
		return ch.(chan struct{})
	}
	return nil
}

// connWatch waits for the peer to close one connection without reading
// from it (see watchConn).
type connWatch struct {
	mu      sync.Mutex // orders stopping against the watcher's deadline resets
	stopped bool       // guarded by mu
	conn    net.Conn
	done    chan struct{}
}

// stop ends the watch and waits for its goroutine, leaving the connection
// with no read deadline (fasthttp sets its own before the next request).
func (w *connWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	_ = w.conn.SetReadDeadline(aLongTimeAgo)
	w.mu.Unlock()
	<-w.done
	_ = w.conn.SetReadDeadline(noDeadline)
}
