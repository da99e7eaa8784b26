package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// Resuming MCP sessions (docs/DECISIONS.md, "A session id outlives its
// session"). A session lives in the memory of one process: a restart (a
// deploy), its instance gone, or its idle timeout ends it, and the SDK
// answers the next request that carries its id 404. The spec tells the
// client to open a new session then; Claude Code, Codex and OpenCode do,
// Gemini CLI does not (its TypeScript SDK client reports the 404 as the
// tool call's error, and every later call fails alike until the agent is
// restarted). So a request whose session is gone is served in a new
// session the server opens for the same token at once, under the hood,
// and the client's id stays an alias of it: nothing changes for a client
// that starts anew by itself, and one that does not keeps working.

// resumedSessions maps a token's session id that outlived its session to
// the session opened in its place.
type resumedSessions struct {
	// opening is held while a session is opened for a gone one, so that two
	// requests of one client arriving together (its GET stream and a call)
	// share one new session; resuming is rare, so one lock for all.
	opening sync.Mutex
	mu      sync.Mutex
	byID    map[string]string // token id + "\x00" + the client's id → the SDK's session id; guarded by mu
}

func (rs *resumedSessions) get(key string) (string, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	sid, ok := rs.byID[key]
	return sid, ok
}

// set records an alias; at 10,000 it first drops the aliases of sessions
// that ended (live lists the open ones).
func (rs *resumedSessions) set(key, sid string, live func() map[string]bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byID == nil {
		rs.byID = map[string]string{}
	}
	if len(rs.byID) >= 10000 {
		open := live()
		for k, v := range rs.byID {
			if !open[v] {
				delete(rs.byID, k)
			}
		}
	}
	rs.byID[key] = sid
}

// serving is the id of the session serving a token's session id: the
// session opened in its place when it outlived its own, else the id itself.
func (rs *resumedSessions) serving(tokenID, sid string) string {
	if alias, ok := rs.get(tokenID + "\x00" + sid); ok {
		return alias
	}
	return sid
}

func (rs *resumedSessions) drop(key string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.byID, key)
}

// liveSessions is the set of the ids of the open MCP sessions.
func (s *Server) liveSessions() map[string]bool {
	out := map[string]bool{}
	for ss := range s.mcp.Sessions() {
		out[ss.ID()] = true
	}
	return out
}

// goneProbe passes a response through unless the SDK answers 404 (the
// session is unknown), which it swallows.
type goneProbe struct {
	http.ResponseWriter
	decided, gone bool
}

func (n *goneProbe) WriteHeader(code int) {
	if !n.decided {
		n.decided = true
		if code == http.StatusNotFound {
			n.gone = true
			return
		}
	}
	if !n.gone {
		n.ResponseWriter.WriteHeader(code)
	}
}

func (n *goneProbe) Write(b []byte) (int, error) {
	if !n.decided {
		n.WriteHeader(http.StatusOK)
	}
	if n.gone {
		return len(b), nil
	}
	return n.ResponseWriter.Write(b)
}

func (n *goneProbe) Flush() {
	if f, ok := n.ResponseWriter.(http.Flusher); ok && !n.gone {
		f.Flush()
	}
}

func (n *goneProbe) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// recorder keeps the headers and status of the initialize the server makes
// for a resumed session (its body is the SDK's answer to it, unused).
type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return len(b), nil
}
func (r *recorder) Flush() {}

// resumeSessions wraps the MCP handler (inside the bearer check): a request
// whose session id this server made but no longer knows is served in a
// session opened for it, for the same token. An initialize is never
// resumed (it opens its own session), nor is a DELETE of a session gone.
// An id of another token's open session is treated as one gone, so the
// sender learns nothing of it and gets a session of its own.
func (s *Server) resumeSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		ti := auth.TokenInfoFromContext(r.Context())
		if _, ours := sessionInstance(sid); !ours || ti == nil {
			next.ServeHTTP(w, r)
			return
		}
		key := ti.UserID + "\x00" + sid
		if alias, ok := s.resumed.get(key); ok {
			r.Header.Set("Mcp-Session-Id", alias)
			if r.Method == http.MethodDelete {
				s.resumed.drop(key)
			}
		}
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body) // in memory already (the adaptor buffers it)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// Another token's open session is answered as one gone, never as
		// "someone else's": what is not yours is not found.
		foreign := s.sessions.foreign(r.Header.Get("Mcp-Session-Id"), ti.UserID)
		if r.Method == http.MethodDelete || r.Method == http.MethodPost && !resumable(body) {
			if foreign {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !foreign {
			probe := &goneProbe{ResponseWriter: w}
			next.ServeHTTP(probe, r)
			if !probe.gone {
				return
			}
		}
		tried := r.Header.Get("Mcp-Session-Id")
		s.resumed.opening.Lock()
		fresh, ok := s.resumed.get(key)
		if !ok || fresh == tried { // else another request of the client opened one meanwhile
			if fresh, ok = s.openSessionLike(next, r); ok {
				s.resumed.set(key, fresh, s.liveSessions)
				s.opts.Logger.Info("MCP session resumed", "was", sid, "now", fresh)
			}
		}
		s.resumed.opening.Unlock()
		if !ok {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		r.Header.Set("Mcp-Session-Id", fresh)
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// resumable says whether a POST's messages may run in a resumed session:
// any but an initialize.
func resumable(body []byte) bool {
	msgs, _ := parseMCPBody(body) // refused ones were answered before: the prelude runs first
	for _, m := range msgs {
		if m.Method == "initialize" {
			return false
		}
	}
	return true
}

// openSessionLike opens a session through next for r's token, as its
// client would (initialize, then initialized, in the protocol version r
// carries), and returns its id.
func (s *Server) openSessionLike(next http.Handler, r *http.Request) (string, bool) {
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" {
		version = "2025-03-26"
	}
	post := func(sid, body string) *recorder {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.String(), strings.NewReader(body))
		if err != nil {
			return &recorder{h: http.Header{}, code: http.StatusInternalServerError}
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", version)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		rec := &recorder{h: http.Header{}}
		next.ServeHTTP(rec, req)
		return rec
	}
	init := post("", initializeBody(version))
	sid := init.h.Get("Mcp-Session-Id")
	if init.code != http.StatusOK || sid == "" {
		return "", false
	}
	if done := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); done.code >= 300 {
		return "", false
	}
	return sid, true
}

// initializeBody is the initialize request of a resumed session.
func initializeBody(version string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "resumed session", "version": ""}}})
	return string(b)
}
