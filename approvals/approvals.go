// Package approvals is the gate between a validated tool call and the
// browser: read-only tools run, anything else runs on a standing grant or
// waits for the person to answer Allow once, Always allow <tool> on this
// site, or Deny.
//
// It owns approval requests (collapsed when identical calls are in flight,
// expiring after a window, withdrawn when their last caller leaves), grants,
// the per-site "ask for every tool" setting, and the source of every
// decision. It knows nothing of HTTP or MCP: callers pass a Call, get a
// Decision, and learn of changes through Options.Notify.
package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tabbridge/tabbridge/store"
)

// Source says where a decision came from.
type Source string

// The sources of a decision.
const (
	SourceReadOnly  Source = "read-only" // the site marks the tool read-only
	SourceGrant     Source = "grant"     // a standing "Always allow"
	SourceAsked     Source = "asked"     // the person answered
	SourceExpired   Source = "expired"   // nobody answered in time
	SourceWithdrawn Source = "withdrawn" // the call ended before an answer
)

// WithdrawReason says why a request was withdrawn, for the words the
// waiting calls get and the person reads on the request.
type WithdrawReason string

// The reasons for a withdrawal.
const (
	WithdrawCancelled WithdrawReason = "cancelled" // every call waiting on it gave up
	WithdrawShutdown  WithdrawReason = "shutdown"  // the server is shutting down
	WithdrawUnshared  WithdrawReason = "unshared"  // the site stopped being shared with the workspace
	WithdrawRestart   WithdrawReason = "restart"   // left pending by an earlier run of the server (WithdrawStale)
	// WithdrawGone: every call waiting on it went away (its connection or
	// session closed) and none came back within the grace, or the person
	// answered while none waited.
	WithdrawGone WithdrawReason = "gone"
)

// Answer is what the person chose.
type Answer string

// The three answers.
const (
	AllowOnce   Answer = "once"
	AlwaysAllow Answer = "always"
	Deny        Answer = "deny"
)

// Request statuses.
const (
	StatusPending   = "pending"
	StatusAllowed   = "allowed"
	StatusDenied    = "denied"
	StatusExpired   = "expired"
	StatusWithdrawn = "withdrawn"
)

var (
	// ErrTaskRequired is returned for a call that needs approval but names no task.
	ErrTaskRequired = errors.New("approvals: a task is required")
	// ErrNoSuchTask is returned when the task is not one of the caller's workspace.
	ErrNoSuchTask = errors.New("approvals: no such task in this workspace")
	// ErrNotFound is returned for a request or grant that does not exist or is not the person's.
	ErrNotFound = errors.New("approvals: not found")
	// ErrNotPending is returned when answering a request already decided, expired or withdrawn.
	ErrNotPending = errors.New("approvals: request is no longer pending")
	// ErrBadAnswer is returned for an answer that is not once, always or deny.
	ErrBadAnswer = errors.New("approvals: answer must be once, always or deny")
	// ErrAgentGone is the cancellation cause a caller gives Decide's context
	// when the agent went away (its connection or session closed) rather than
	// cancelling: the request then stays open for the grace, so a retry of
	// the same call rejoins it. Answer returns it for an answer given while no
	// call waited: nothing ran, and the request is withdrawn.
	ErrAgentGone = errors.New("approvals: the agent stopped waiting")

	// ErrNoStandingGrant is returned for "Always allow" on a request of a
	// tool the site marks consequentialHint: each of its calls must be asked.
	ErrNoStandingGrant = errors.New("approvals: the site asks for every call of this tool to be confirmed, so it cannot be always allowed")
)

// Call is a validated tool call asking to run.
type Call struct {
	OwnerID     string // the person whose browser runs it
	WorkspaceID string
	TokenID     string // the agent token (or OAuth grant) that called: the card names it
	TaskID      string
	Site        string
	Tool        string
	Arguments   json.RawMessage
	ReadOnly    bool // the site annotates the tool readOnlyHint
	// Consequential is set for a tool annotated consequentialHint: it always
	// asks, whatever grants exist, and cannot be answered "Always allow".
	Consequential bool
}

// Decision is the gate's verdict on a call.
type Decision struct {
	Allowed   bool
	Source    Source
	RequestID string
	Answer    Answer
	DecidedBy string
	DecidedAt time.Time
	Withdrawn WithdrawReason // why, when Source is SourceWithdrawn
}

// Event tells a person's screens that a request changed.
type Event struct {
	Type    string // approval.created, approval.updated (waiters came or went), approval.decided, approval.expired, approval.withdrawn
	Request Request
}

// Options configures a Gate.
type Options struct {
	DB *store.DB
	// Window is how long a request waits for an answer (default 5 minutes).
	Window time.Duration
	// Grace is how long a request whose callers all went away stays open,
	// marked as such, for an identical call to rejoin (default 30 s): many
	// clients time out at 60 s and retry the same call.
	Grace time.Duration
	// Notify, when set, is called after each change, outside every lock.
	Notify func(ownerID string, e Event)
	Logger *slog.Logger
	// MaxPending and MaxPendingBytes limit the requests one workspace has
	// waiting (defaults DefaultMaxPending, DefaultMaxPendingBytes; limits.go).
	MaxPending      int
	MaxPendingBytes int
}

// Gate decides calls. It keeps the requests being waited on in memory; the
// database holds every request and grant.
type Gate struct {
	opts Options // static after New

	mu sync.Mutex
	// byKey and byID index the in-flight requests; guarded by mu.
	byKey map[string]*waiting
	byID  map[string]*waiting

	// askAll caches the per-site setting (see askAllTTL).
	askAll sync.Map
}

// waiting is one in-flight request and the calls waiting on it.
type waiting struct {
	req   Request
	key   string
	timer *time.Timer
	// grace, set while no caller waits (req.AgentGoneAt set), withdraws the
	// request when it fires; guarded by Gate.mu.
	grace *time.Timer
	// waiters counts callers still waiting; guarded by Gate.mu.
	waiters int
	// settled is set once, under Gate.mu, when the request leaves the maps.
	settled bool
	// decision is written before done is closed and read after.
	decision Decision
	done     chan struct{}
}

// New returns a Gate.
func New(o Options) *Gate {
	if o.Window == 0 {
		o.Window = 5 * time.Minute
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxPendingBytes == 0 {
		o.MaxPendingBytes = DefaultMaxPendingBytes
	}
	return &Gate{opts: o, byKey: map[string]*waiting{}, byID: map[string]*waiting{}}
}

// Waiters reports how many calls wait on an in-flight request (0 once it ended).
func (g *Gate) Waiters(requestID string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.byID[requestID]; w != nil {
		return w.waiters
	}
	return 0
}

// Window is how long a request waits for an answer.
func (g *Gate) Window() time.Duration { return g.opts.Window }

// DefaultGrace is Options.Grace's default: half of the 60 s after which
// common clients give up, so a retry that follows at once finds the request.
const DefaultGrace = 30 * time.Second

// Grace is how long a request nobody waits on stays open for a retry.
func (g *Gate) Grace() time.Duration { return g.opts.Grace }

// Decide returns whether call may run, waiting for the person when it must.
// It returns ctx's error if the caller gives up first; the request is then
// withdrawn once no other identical call waits on it — at once when the
// caller cancelled, after the grace when ctx's cause is ErrAgentGone.
func (g *Gate) Decide(ctx context.Context, call Call) (Decision, error) {
	if call.ReadOnly && !call.Consequential {
		askAll, err := g.AskAll(ctx, call.OwnerID, call.Site)
		if err != nil {
			return Decision{}, err
		}
		if !askAll {
			return Decision{Allowed: true, Source: SourceReadOnly}, nil
		}
	}
	if call.TaskID == "" {
		return Decision{}, ErrTaskRequired
	}
	if _, err := g.opts.DB.WorkspaceTask(ctx, call.WorkspaceID, call.TaskID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Decision{}, ErrNoSuchTask
		}
		return Decision{}, fmt.Errorf("decide: %w", err)
	}
	if call.Consequential {
		return g.ask(ctx, call)
	}
	if gr, err := g.liveGrant(ctx, call.WorkspaceID, call.Site, call.Tool); err != nil {
		return Decision{}, err
	} else if gr != nil {
		return Decision{Allowed: true, Source: SourceGrant, DecidedBy: gr.CreatedBy, DecidedAt: gr.CreatedAt}, nil
	}
	return g.ask(ctx, call)
}

// ask joins or opens the request for call and waits for its end.
func (g *Gate) ask(ctx context.Context, call Call) (Decision, error) {
	w, event, req, err := g.join(ctx, call)
	if err != nil {
		return Decision{}, err
	}
	if sink, _ := ctx.Value(requestSinkKey{}).(func(string)); sink != nil {
		sink(req.ID)
	}
	g.notify(call.OwnerID, event, req)
	select {
	case <-w.done:
		return w.decision, nil
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), ErrAgentGone) {
			g.abandon(w)
		} else {
			g.leave(w)
		}
		return Decision{}, ctx.Err()
	}
}

// collapseKey identifies identical calls: same task, site, tool and
// arguments (compared in canonical form).
func collapseKey(call Call, argsHash string) string {
	return call.OwnerID + "\x00" + call.TaskID + "\x00" + call.Site + "\x00" + call.Tool + "\x00" + argsHash
}

// join adds the caller to the in-flight request for call, opening one if
// none exists; it returns the event to tell (approval.created, or
// approval.updated for a joined one) and the request's copy.
func (g *Gate) join(ctx context.Context, call Call) (*waiting, string, Request, error) {
	canon, pretty, err := canonical(call.Arguments)
	if err != nil {
		return nil, "", Request{}, err
	}
	sum := sha256.Sum256(canon)
	hash := hex.EncodeToString(sum[:])
	key := collapseKey(call, hash)
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.byKey[key]; w != nil {
		w.waiters++
		if w.grace != nil { // a retry of a call that went away: it waits again
			w.grace.Stop()
			w.grace, w.req.AgentGoneAt = nil, nil
		}
		g.saveWaiters(w)
		return w, "approval.updated", w.req, nil
	}
	if err := g.admit(call.WorkspaceID, len(pretty)); err != nil {
		return nil, "", Request{}, err
	}
	now := store.Now()
	req := Request{
		ID: store.NewID(), UserID: call.OwnerID, WorkspaceID: call.WorkspaceID, TaskID: call.TaskID,
		Site: call.Site, Tool: call.Tool, Arguments: pretty, ArgsHash: hash, Status: StatusPending,
		Waiters: 1, CreatedAt: now, ExpiresAt: now.Add(g.opts.Window), Consequential: call.Consequential, TokenID: call.TokenID,
	}
	// Inserted under the lock so two identical calls never open two requests.
	if err := g.opts.DB.WithContext(context.WithoutCancel(ctx)).Create(&req).Error; err != nil {
		return nil, "", Request{}, fmt.Errorf("open approval request: %w", err)
	}
	w := &waiting{req: req, key: key, waiters: 1, done: make(chan struct{})}
	w.timer = time.AfterFunc(g.opts.Window, func() { g.expire(w) })
	g.byKey[key], g.byID[req.ID] = w, w
	return w, "approval.created", req, nil
}

// leave drops one waiter; the last one to leave withdraws the request. The
// request leaves the maps in the same locked step, so a new identical call
// opens a request of its own instead of joining one being withdrawn.
func (g *Gate) leave(w *waiting) {
	g.mu.Lock()
	w.waiters--
	last := w.waiters == 0 && g.detach(w)
	fewer := !last && !w.settled
	if fewer {
		g.saveWaiters(w)
	}
	r := w.req
	g.mu.Unlock()
	if last {
		g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawCancelled}, "approval.withdrawn")
	} else if fewer {
		g.notify(r.UserID, "approval.updated", r)
	}
}

// abandon drops one waiter whose agent went away. The last one to go leaves
// the request open for the grace, marked "the agent stopped waiting", so an
// identical retry rejoins it; when the grace ends it is withdrawn.
func (g *Gate) abandon(w *waiting) {
	g.mu.Lock()
	if w.settled {
		g.mu.Unlock()
		return
	}
	w.waiters--
	if w.waiters == 0 {
		now := store.Now()
		w.req.AgentGoneAt = &now
		w.grace = time.AfterFunc(g.opts.Grace, func() { g.graceOver(w) })
	}
	g.saveWaiters(w)
	r := w.req
	g.mu.Unlock()
	g.notify(r.UserID, "approval.updated", r)
}

type requestSinkKey struct{}

// WithRequestSink returns ctx for Decide, which then tells sink the id of
// the request the call waits on (see CancelAbandoned).
func WithRequestSink(ctx context.Context, sink func(requestID string)) context.Context {
	return context.WithValue(ctx, requestSinkKey{}, sink)
}

// CancelAbandoned withdraws a request, as cancelled, if no call waits on it:
// a client's cancel may arrive after its connection closed and the call
// counted as gone; it still means the agent does not want the call.
func (g *Gate) CancelAbandoned(requestID string) {
	g.mu.Lock()
	w := g.byID[requestID]
	ok := w != nil && w.waiters == 0 && g.detach(w)
	g.mu.Unlock()
	if ok {
		g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawCancelled}, "approval.withdrawn")
	}
}

// graceOver withdraws a request no call came back to.
func (g *Gate) graceOver(w *waiting) {
	g.mu.Lock()
	ok := w.waiters == 0 && g.detach(w)
	g.mu.Unlock()
	if ok {
		g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawGone}, "approval.withdrawn")
	}
}

// saveWaiters writes how many calls wait on a request, and whether its
// agent went away, to its row, so every screen can say so. The caller holds
// g.mu, so rows take the counts in the order they happened.
func (g *Gate) saveWaiters(w *waiting) {
	w.req.Waiters = w.waiters
	err := g.opts.DB.Model(&Request{}).Where("id = ? AND status = ?", w.req.ID, StatusPending).
		Updates(map[string]any{"waiters": w.waiters, "agent_gone_at": w.req.AgentGoneAt}).Error
	if err != nil {
		g.opts.Logger.Error("save approval waiters", "request", w.req.ID, "err", err)
	}
}

func (g *Gate) expire(w *waiting) {
	g.settle(w, StatusExpired, Decision{Source: SourceExpired}, "approval.expired")
}

// settle ends a request once: it leaves the maps, its row takes status, every
// waiter gets d, and the person's screens are told. It returns the request as
// it ended, and false if it had already ended.
func (g *Gate) settle(w *waiting, status string, d Decision, event string) (Request, bool) {
	g.mu.Lock()
	ok := g.detach(w)
	g.mu.Unlock()
	if !ok {
		return Request{}, false
	}
	return g.finish(w, status, d, event), true
}

// detach takes a request out of the maps, once; false if it already was.
// The caller holds g.mu.
func (g *Gate) detach(w *waiting) bool {
	if w.settled {
		return false
	}
	w.settled = true
	delete(g.byKey, w.key)
	delete(g.byID, w.req.ID)
	w.timer.Stop()
	if w.grace != nil {
		w.grace.Stop()
	}
	return true
}

// finish ends a detached request: its row, its waiters and the screens.
func (g *Gate) finish(w *waiting, status string, d Decision, event string) Request {
	r := w.req
	d.RequestID = r.ID
	if d.DecidedAt.IsZero() {
		d.DecidedAt = store.Now()
	}
	set := map[string]any{"status": status, "answer": string(d.Answer), "decided_by": d.DecidedBy, "decided_at": d.DecidedAt,
		"withdrawn_reason": string(d.Withdrawn)}
	err := g.opts.DB.Model(&Request{}).Where("id = ? AND status = ?", r.ID, StatusPending).Updates(set).Error
	if err != nil {
		g.opts.Logger.Error("settle approval request", "request", r.ID, "status", status, "err", err)
	}
	r.Status, r.Answer, r.DecidedBy, r.DecidedAt, r.WithdrawnReason = status, d.Answer, d.DecidedBy, &d.DecidedAt, d.Withdrawn
	w.decision = d
	close(w.done)
	g.notify(r.UserID, event, r)
	return r
}

func (g *Gate) notify(ownerID, typ string, r Request) {
	if g.opts.Notify != nil {
		g.opts.Notify(ownerID, Event{Type: typ, Request: r})
	}
}

// Answer records the person's answer to a request of theirs and releases
// every call waiting on it. AlwaysAllow also creates the grant.
func (g *Gate) Answer(ctx context.Context, ownerID, requestID string, a Answer) (Request, error) {
	if a != AllowOnce && a != AlwaysAllow && a != Deny {
		return Request{}, ErrBadAnswer
	}
	g.mu.Lock()
	w := g.byID[requestID]
	var req Request
	if w != nil {
		req = w.req
	}
	g.mu.Unlock()
	if w == nil || req.UserID != ownerID {
		return Request{}, g.whyNotPending(ctx, ownerID, requestID)
	}
	if a == AlwaysAllow && req.Consequential {
		return Request{}, ErrNoStandingGrant
	}
	g.mu.Lock()
	gone := w.waiters == 0 && g.detach(w)
	g.mu.Unlock()
	if gone { // nobody would receive the result: nothing runs
		ended := g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawGone}, "approval.withdrawn")
		return ended, ErrAgentGone
	}
	d := Decision{Allowed: a != Deny, Source: SourceAsked, Answer: a, DecidedBy: ownerID}
	status := StatusAllowed
	if a == Deny {
		status = StatusDenied
	}
	ended, ok := g.settle(w, status, d, "approval.decided")
	if !ok {
		return Request{}, ErrNotPending // it expired or was withdrawn first: no grant either
	}
	if a == AlwaysAllow {
		if err := g.grant(ctx, req, ownerID); err != nil {
			return ended, err
		}
	}
	return ended, nil
}

// whyNotPending tells a missing request from one that already ended.
func (g *Gate) whyNotPending(ctx context.Context, ownerID, requestID string) error {
	if _, err := g.Request(ctx, ownerID, requestID); err != nil {
		return err
	}
	return ErrNotPending
}

// WithdrawStale withdraws requests left pending by an earlier run of the
// server (WithdrawRestart): no call waits on them any more.
func (g *Gate) WithdrawStale(ctx context.Context) (int64, error) {
	res := g.opts.DB.WithContext(ctx).Model(&Request{}).Where("status = ?", StatusPending).
		Updates(map[string]any{"status": StatusWithdrawn, "decided_at": store.Now(), "withdrawn_reason": string(WithdrawRestart)})
	if res.Error != nil {
		return 0, fmt.Errorf("withdraw stale requests: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// Close withdraws every in-flight request (the server is shutting down); the
// calls waiting on them get a withdrawn decision.
func (g *Gate) Close() {
	g.mu.Lock()
	all := make([]*waiting, 0, len(g.byID))
	for _, w := range g.byID {
		all = append(all, w)
	}
	g.mu.Unlock()
	for _, w := range all {
		g.settle(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawShutdown}, "approval.withdrawn")
	}
}

// canonical returns the arguments in canonical form (keys sorted, numbers
// kept exactly) for comparing, and pretty-printed for the person to read.
func canonical(args json.RawMessage) (canon []byte, pretty string, err error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "", fmt.Errorf("arguments: %w", err)
	}
	canon, err = json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("arguments: %w", err)
	}
	p, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, "", fmt.Errorf("arguments: %w", err)
	}
	return canon, string(p), nil
}
