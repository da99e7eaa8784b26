package server

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
)

// Revocation ends what it started (docs/DECISIONS.md). When the person takes
// an agent's access away — revokes its token or its connected app, or
// deletes its workspace — every tool call the agent has running ends with
// approvals.ErrAccessRevoked (the agent reads why, and what to do), the
// requests it left waiting for approval are withdrawn, and its MCP sessions
// close; on every instance. Calls and sessions follow the agent's id in
// s.agents, so an ending reaches them wherever they run.

// agentStands is the database's word on whether an agent's credential still
// stands, for the recheck after a bus outage. A failed read counts as
// standing: the agent was authenticated a moment before, and cutting every
// agent's calls over a transient error would do more harm than the rare
// revocation the check might miss until the agent's next request (which
// is authenticated again).
func agentStands(db *store.DB) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		ok, err := db.AgentActive(ctx, id)
		return ok || err != nil, nil
	}
}

// tokenRevoked ends what a revoked agent token started, on every instance.
func (s *Server) tokenRevoked(tokenID string) {
	s.agents.end(tokenID)
	s.withdrawAgent(tokenID)
}

// workspaceAgentsGone ends what the agents of a deleted workspace started,
// on every instance: ids are its tokens and grants, read before the
// deletion (which deletes them).
func (s *Server) workspaceAgentsGone(ids []string) {
	for _, id := range ids {
		s.agents.end(id)
	}
}

// withdrawAgent withdraws the requests an agent left waiting with no call
// on them (the ones it still waits on are withdrawn as its calls end). A
// failure is logged: those requests then end as their grace runs out.
func (s *Server) withdrawAgent(id string) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if _, err := s.gate.WithdrawAgent(ctx, id); err != nil {
		s.opts.Logger.Warn("withdraw the requests of a revoked agent", "agent", id, "err", err)
	}
}

// followAgent ends ctx with approvals.ErrAccessRevoked when the agent's
// access is taken away; the returned function stops following.
func (s *Server) followAgent(tokenID string, cancel context.CancelCauseFunc) (stop func()) {
	ended, unfollow := s.agents.follow(context.Background(), tokenID)
	stopAfter := context.AfterFunc(ended, func() { cancel(approvals.ErrAccessRevoked) })
	return func() { stopAfter(); unfollow() }
}

// closeWhenRevoked closes an MCP session when its agent's access is taken
// away, in the background, once the POSTs carrying the session's calls have
// written their answers and a moment more (the calls end as they follow the
// agent too): the SDK's close ends every stream of the session at once, and
// a client whose stream ends before it read a call's answer reads "request
// terminated without response" or the standalone stream's end instead of
// why. It returns when the session has closed,
// however it closed.
func (s *Server) closeWhenRevoked(ss *mcp.ServerSession, tokenID string) {
	ended, unfollow := s.agents.follow(context.Background(), tokenID)
	defer unfollow()
	stop := context.AfterFunc(ended, func() {
		s.opts.Logger.Info("closing the MCP session of an agent whose access was taken away", "session", ss.ID(), "agent", tokenID)
		t := time.NewTimer(answerGrace)
		defer t.Stop()
		idle := s.posts.idle(ss.ID())
		select {
		case <-idle:
			// no call to answer: close at once
			ss.Close()
			return
		default:
		}
		select {
		case <-idle:
			// The answers are written, each on its own POST's connection;
			// the session's close ends its standalone stream on another,
			// and a client that reads that end first fails the calls it
			// has not yet read the answers of (go-sdk's client with no
			// retries does). Nothing else reaches the session meanwhile:
			// the revoked credential is refused before it.
			linger := time.NewTimer(answerLinger)
			defer linger.Stop()
			select {
			case <-linger.C:
			case <-t.C:
			}
		case <-t.C:
		}
		ss.Close()
	})
	ss.Wait()
	if !stop() { // the close began: let it finish before the goroutine ends
		ss.Close()
	}
}

// answerGrace bounds how long a revoked agent's session stays open for its
// calls' answers to be written, and answerLinger is how long it stays open
// once they are, for the client to read them before the session's streams
// end.
const (
	answerGrace  = 10 * time.Second
	answerLinger = time.Second
)

// sessionPosts counts the MCP POSTs in flight in each session (by the id of
// the session serving them), so a session can be closed once they are
// answered.
type sessionPosts struct {
	mu    sync.Mutex
	n     map[string]int             // session id → POSTs in flight; guarded by mu
	idles map[string][]chan struct{} // session id → closed when n drops to 0; guarded by mu
}

// begin counts a POST in session sid until the returned function is called.
func (p *sessionPosts) begin(sid string) (end func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n, p.idles = map[string]int{}, map[string][]chan struct{}{}
	}
	p.n[sid]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.n[sid]--; p.n[sid] > 0 {
			return
		}
		delete(p.n, sid)
		for _, ch := range p.idles[sid] {
			close(ch)
		}
		delete(p.idles, sid)
	}
}

// idle returns a channel closed once session sid has no POST in flight.
func (p *sessionPosts) idle(sid string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.n[sid] == 0 {
		close(ch)
		return ch
	}
	p.idles[sid] = append(p.idles[sid], ch)
	return ch
}
