package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/store"
)

// DefaultMCPSessionsPerToken is how many MCP sessions one agent token may
// hold open by default. Clients that exit without DELETE leave their session
// until the idle timeout, so the cap leaves room for an agent restarted every
// minute for an hour and more, while 27,000 sessions of one token (+484 MB
// measured) are out of reach (docs/DECISIONS.md).
const DefaultMCPSessionsPerToken = 100

// codeSessionLimit is the JSON-RPC error code of an initialize refused by the
// session cap (the implementation-defined server range).
const codeSessionLimit = -32000

// sessionCap counts each agent token's open MCP sessions: a session counts
// from its initialize until the SDK closes it (DELETE, idle timeout,
// shutdown).
type sessionCap struct {
	limit int // static

	mu    sync.Mutex
	open  map[string]int    // agent token id → open sessions; guarded by mu
	owner map[string]string // open session id → its agent token id; guarded by mu
}

func newSessionCap(limit int) *sessionCap {
	return &sessionCap{limit: limit, open: map[string]int{}, owner: map[string]string{}}
}

// own records the token an open session belongs to, until disown.
func (c *sessionCap) own(sid, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner[sid] = token
}

func (c *sessionCap) disown(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.owner, sid)
}

// foreign reports whether sid is a session open here for a token other
// than token: such a request is answered as for a session that is gone.
func (c *sessionCap) foreign(sid, token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owner[sid]
	return ok && o != token
}

// full reports whether the token already holds its limit.
func (c *sessionCap) full(token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[token] >= c.limit
}

// admit counts one more session for the token, false at the limit.
func (c *sessionCap) admit(token string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[token] >= c.limit {
		return false
	}
	c.open[token]++
	return true
}

func (c *sessionCap) release(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[token]--; c.open[token] <= 0 {
		delete(c.open, token)
	}
}

// sessionLimitMessage is what an agent reads when its token holds every
// session it may.
func (s *Server) sessionLimitMessage() string {
	n, noun := s.opts.MCPSessionsPerToken, "sessions"
	if n == 1 {
		noun = "session"
	}
	return fmt.Sprintf("This agent token already has %d open MCP %s, the most one token may hold. "+
		"Reuse an open session, or end the ones you no longer use (DELETE /mcp with their Mcp-Session-Id header); "+
		"idle sessions end by themselves after %s.", n, noun, s.opts.MCPSessionTimeout)
}

// limitSessions is the MCP middleware that holds each token to its session
// cap: an initialize beyond it is refused with a JSON-RPC error (the SDK then
// drops the session), and an admitted session is released when it closes.
// It is the exact count; refuseFullSessions answers most refusals earlier,
// with HTTP 429, and this catches initializes that race past it.
func (s *Server) limitSessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" {
			return next(ctx, method, req)
		}
		token := sessionToken(req.GetExtra())
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if token == "" || !ok {
			return next(ctx, method, req)
		}
		if !s.sessions.admit(token) {
			return nil, &jsonrpc.Error{Code: codeSessionLimit, Message: s.sessionLimitMessage()}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			s.sessions.release(token)
			return res, err
		}
		sid := ss.ID()
		s.sessions.own(sid, token)
		go func() {
			s.closeWhenRevoked(ss, token) // revoke.go: returns when the session closed
			s.sessions.disown(sid)
			s.sessions.release(token)
		}()
		return res, nil
	}
}

func sessionToken(extra *mcp.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	return extra.TokenInfo.UserID
}

// refuseFullSessions answers a request that would open a session (a POST
// without Mcp-Session-Id) with HTTP 429 and a JSON-RPC error when the token
// already holds its cap, before the SDK builds a session for it.
func (s *Server) refuseFullSessions(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	id, _ := r.Context().Value(localAgent).(*store.AgentIdentity)
	if id == nil || !s.sessions.full(id.TokenID) {
		return false
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": codeSessionLimit, "message": s.sessionLimitMessage()}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(body)
	return true
}
