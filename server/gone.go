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
