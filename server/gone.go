package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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

// goneWatches knows, for each MCP POST, whether its client went away, and
// for each MCP session, the calls running in it.
type goneWatches struct {
	m sync.Map // watch id → *postWatch
	// byCall maps an agent token, a session id and a JSON-RPC request id
	// (its raw JSON) to the watch of the POST carrying that call, so that a
	// client's cancel of it is read (noteCancels); only the token that made
	// the call can cancel it.
	byCall sync.Map // callKey → *postWatch

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

// postWatch is what is known of one MCP POST's client.
type postWatch struct {
	gone     chan struct{} // closed when its connection closed (markGone)
	goneOnce sync.Once
	// closed looks at the connection now (see stopper.closed); set before
	// the watch is published, static after.
	closed   func() bool
	timedOut atomic.Bool // its client cancelled a call saying it timed out
	// request is the approval request its call waits on (the last one, for
	// a batch), so that a cancel arriving after the call counted as gone
	// still withdraws it.
	request atomic.Pointer[string]
}

// markGone records that the POST's client went away.
func (pw *postWatch) markGone() { pw.goneOnce.Do(func() { close(pw.gone) }) }

// probeGone looks at the connection at once: true (and gone closed) if the
// client has closed it, whether or not the watch has noticed yet.
func (pw *postWatch) probeGone() bool {
	if pw.closed != nil && pw.closed() {
		pw.markGone()
		return true
	}
	return false
}

// holdGoneWatch, set only by tests (SetHoldGoneWatch), runs in a watch's
// goroutine before it reports the hang-up it saw: it stands for a loaded
// machine where that goroutine is late.
var holdGoneWatch func()

// lateCancelWindow is how long after its POST ended a call's cancel is
// still matched to the request it left.
const lateCancelWindow = 10 * time.Second

// watch starts watching the connection behind r, marks r with the watch's
// id, and returns the function that stops watching (call it before the
// handler returns: the connection is the server's again afterwards). A
// request whose connection cannot be watched gets no id. A POST that
// cancels a call because its client timed out marks that call's watch.
func (g *goneWatches) watch(r *http.Request, msgs []rpcMessage, tokenID string, cancelAbandoned func(requestID string)) (stop func()) {
	r.Header.Del(goneHeader)
	sid := tokenID + "\x00" + r.Header.Get("Mcp-Session-Id")
	g.noteCancels(sid, msgs, cancelAbandoned)
	pw := &postWatch{gone: make(chan struct{})}
	onGone := pw.markGone
	if hold := holdGoneWatch; hold != nil {
		onGone = func() { hold(); pw.markGone() }
	}
	w, ok := watchRequest(r, onGone)
	if !ok {
		return func() {}
	}
	pw.closed = w.closed
	id := rand.Text()
	g.m.Store(id, pw)
	var keys []string
	for _, m := range msgs {
		if m.Method == "tools/call" && len(m.ID) > 0 {
			k := callKey(sid, m.ID)
			keys = append(keys, k)
			g.byCall.Store(k, pw)
		}
	}
	r.Header.Set(goneHeader, id)
	return func() {
		w.stop()
		g.m.Delete(id)
		time.AfterFunc(lateCancelWindow, func() {
			for _, k := range keys {
				g.byCall.CompareAndDelete(k, pw)
			}
		})
	}
}

// watchOf returns the watch with id, or nil for an unknown id.
func (g *goneWatches) watchOf(id string) *postWatch {
	if id == "" {
		return nil
	}
	if pw, ok := g.m.Load(id); ok {
		return pw.(*postWatch)
	}
	return nil
}

// rpcMessage is what the watch reads of a JSON-RPC message (readMCPBody):
// ids are canonical, so the SDK's id and the watch's agree.
type rpcMessage struct {
	ID     json.RawMessage
	Method string
	Tool   string // params.name of tools/call
	Params struct {
		RequestID json.RawMessage // of notifications/cancelled
		Reason    string
	}
}

// noteCancels reads the cancels among msgs. One because the client timed
// out (the TypeScript SDK, and mcp-remote through it, send
// notifications/cancelled with the reason "… Request timed out") marks its
// call: such an agent stopped waiting and may retry, unlike one that chose
// to cancel. Any other cancel of a call that already counted as gone (its
// connection closed first) withdraws the request it left, through
// cancelAbandoned — unless the call was cancelled for a timeout before.
func (g *goneWatches) noteCancels(sid string, msgs []rpcMessage, cancelAbandoned func(requestID string)) {
	for _, m := range msgs {
		if m.Method != "notifications/cancelled" || len(m.Params.RequestID) == 0 {
			continue
		}
		v, ok := g.byCall.Load(callKey(sid, m.Params.RequestID))
		if !ok {
			continue
		}
		pw := v.(*postWatch)
		if pw.timedOut.Load() {
			// The client already gave up on this call for its timeout; a later cancel
			// of it is its clean-up (OpenCode aborts the call's signal at the end of
			// its turn, and the TypeScript SDK sends a second cancel, "AbortError"),
			// not a person stopping it: the request stays for the retry.
			continue
		}
		reason := strings.ToLower(m.Params.Reason)
		if strings.Contains(reason, "timed out") || strings.Contains(reason, "timeout") {
			pw.timedOut.Store(true)
		} else if id := pw.request.Load(); id != nil {
			cancelAbandoned(*id)
		}
	}
}

// callKey names one call of one token's session (sid holds both).
func callKey(sid string, rpcID json.RawMessage) string {
	return sid + "\x00" + string(bytes.TrimSpace(rpcID))
}

// connWatch waits for the peer to close one connection without reading
// from it (see watchConn).
type connWatch struct {
	mu      sync.Mutex // orders stopping against the watcher's start and deadline resets
	stopped bool       // guarded by mu
	started bool       // guarded by mu: the watcher peeks (its timer fired before stop)
	timer   *time.Timer
	conn    net.Conn
	raw     syscall.RawConn // for closed's look at the socket (nil where it cannot look)
	done    chan struct{}   // closed when a started watcher ends
}

// stop ends the watch, leaving the connection with no read deadline
// (fasthttp sets its own before the next request). A watcher that never
// started costs only its timer; one that did is woken and waited for.
func (w *connWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	started := w.started
	if started {
		_ = w.conn.SetReadDeadline(aLongTimeAgo)
	}
	w.mu.Unlock()
	w.timer.Stop()
	if !started {
		return
	}
	<-w.done
	_ = w.conn.SetReadDeadline(noDeadline)
}
