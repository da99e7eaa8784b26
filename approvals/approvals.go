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

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

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
	// SourceRemembered: the person denied this same call (same task, site,
	// tool and arguments) before, and has not let it be asked again.
	SourceRemembered Source = "remembered"
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
	// WithdrawInstanceLost: the server instance its calls waited on stopped
	// without a clean shutdown (its heartbeat went stale: WithdrawInstance).
	WithdrawInstanceLost WithdrawReason = "instance_lost"
	// WithdrawGone: every call waiting on it went away (its connection or
	// session closed) and none came back within the grace, or the person
	// answered while none waited.
	WithdrawGone WithdrawReason = "gone"
	// WithdrawTaskFinished: its task was set to completed or rejected (by
	// the person, or by the agent), so no call of it is asked any more.
	WithdrawTaskFinished WithdrawReason = "task_finished"
	// WithdrawRevoked: the person took the calling agent's access away
	// (revoked its token or connected app, or deleted its workspace).
	WithdrawRevoked WithdrawReason = "revoked"
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
	// ErrWorkspaceGone is returned when the call's workspace was deleted while the call was
	// placed (after its task was found, before its request was opened).
	ErrWorkspaceGone = errors.New("approvals: the call's workspace was deleted")
	// ErrTaskFinished is returned (wrapped in a *TaskFinishedError) when the
	// task is completed or rejected: its work is over, so nothing is asked.
	ErrTaskFinished = errors.New("approvals: the task is finished")
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
	// ErrAccessRevoked is the cancellation cause a caller gives Decide's
	// context when the person took the agent's access away: the call leaves
	// at once, and a request no other call waits on is withdrawn as
	// WithdrawRevoked (no grace: the agent cannot come back).
	ErrAccessRevoked = errors.New("approvals: the person took the agent's access away")

	// ErrNoStandingGrant is returned for "Always allow" on a request of a
	// tool the site marks consequentialHint: each of its calls must be asked.
	ErrNoStandingGrant = errors.New("approvals: the site asks for every call of this tool to be confirmed, so it cannot be always allowed")
	// ErrMoreCalls refuses an Allow given for fewer identical calls than wait on the request now
	// (AnswerFor): more joined after the person's screen showed it.
	ErrMoreCalls = errors.New("approvals: more identical calls wait than the answer was given for")
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
	// Title, Description and InputSchema are the tool as the site describes
	// it now; a request keeps them for its card.
	Title, Description string
	InputSchema        json.RawMessage
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
	// InstanceID names this server instance on the requests it opens, so
	// the others can withdraw them if it dies ("" on a lone instance).
	InstanceID string
	// Settled, when set, is called with the id of each request this
	// instance settled in the database, to tell the other instances
	// (whose identical calls may wait on it) to read it: see Settled.
	Settled func(requestID string)
	// Trusted, when set, says whether cached settings may be used: false
	// while another instance's change could be missed.
	Trusted func() bool
}

// Gate decides calls. It keeps the requests being waited on in memory; the
// database holds every request and grant, and arbitrates between instances:
// a request's row moves from pending exactly once (whoever's UPDATE … WHERE
// status = 'pending' wins settles it, and tells the others), its waiters
// column counts the calls waiting on every instance, and a unique index on
// the collapse key of pending rows makes identical calls on any instance
// meet on one request.
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

// workspaceTask is the call's task, or ErrNoSuchTask when it is not one of
// the call's workspace.
func (g *Gate) workspaceTask(ctx context.Context, call Call) (*store.Task, error) {
	task, err := g.opts.DB.WorkspaceTask(ctx, call.WorkspaceID, call.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoSuchTask
	}
	if err != nil {
		return nil, fmt.Errorf("decide: %w", err)
	}
	return task, nil
}

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
			// A read-only call needs no task, but one it names must be the
			// workspace's: the call is filed under it on the task's page.
			if call.TaskID != "" {
				if _, err := g.workspaceTask(ctx, call); err != nil {
					return Decision{}, err
				}
			}
			return Decision{Allowed: true, Source: SourceReadOnly}, nil
		}
	}
	if call.TaskID == "" {
		return Decision{}, ErrTaskRequired
	}
	task, err := g.workspaceTask(ctx, call)
	if err != nil {
		return Decision{}, err
	}
	if !store.TaskOpen(task.Status) {
		return Decision{}, &TaskFinishedError{Status: task.Status}
	}
	args, err := canonical(call.Arguments)
	if err != nil {
		return Decision{}, err
	}
	// A remembered denial comes before a grant: the person said no to
	// exactly this call, which an "Always allow" of the tool given for
	// another call does not take back.
	if d, err := g.rememberedDenial(ctx, call, args.hash); err != nil || d != nil {
		if err != nil {
			return Decision{}, err
		}
		return *d, nil
	}
	if call.Consequential {
		return g.ask(ctx, call, args)
	}
	if gr, err := g.liveGrant(ctx, call.WorkspaceID, call.Site, call.Tool); err != nil {
		return Decision{}, err
	} else if gr != nil {
		return Decision{Allowed: true, Source: SourceGrant, DecidedBy: gr.CreatedBy, DecidedAt: gr.CreatedAt}, nil
	}
	return g.ask(ctx, call, args)
}

// TaskFinishedError is a call in a completed or rejected task.
type TaskFinishedError struct{ Status string }

func (e *TaskFinishedError) Error() string { return "approvals: the task is " + e.Status }
func (e *TaskFinishedError) Unwrap() error { return ErrTaskFinished }

// ask joins or opens the request for call and waits for its end.
func (g *Gate) ask(ctx context.Context, call Call, args canonArgs) (Decision, error) {
	w, event, req, err := g.join(ctx, call, args)
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
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, ErrAgentGone):
			g.abandon(w)
		case errors.Is(cause, ErrAccessRevoked):
			g.leave(w, WithdrawRevoked)
		default:
			g.leave(w, WithdrawCancelled)
		}
		return Decision{}, ctx.Err()
	}
}

// collapseKey identifies identical calls: same agent, task, site, tool and
// arguments (compared in canonical form). The agent is part of it because
// the card names who asked: another agent's identical call joining would
// run on an answer given to the first one's name.
func collapseKey(call Call, argsHash string) string {
	return call.OwnerID + "\x00" + call.TokenID + "\x00" + call.TaskID + "\x00" + call.Site + "\x00" + call.Tool + "\x00" + argsHash
}

// join adds the caller to the in-flight request for call, opening one if
// none exists; it returns the event to tell (approval.created, or
// approval.updated for a joined one) and the request's copy.
func (g *Gate) join(ctx context.Context, call Call, args canonArgs) (*waiting, string, Request, error) {
	hash := args.hash
	key := collapseKey(call, hash)
	ksum := sha256.Sum256([]byte(key))
	dbKey := hex.EncodeToString(ksum[:]) // the key holds NULs, which PostgreSQL's text refuses
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.byKey[key]; w != nil {
		n, err := g.addWaiters(w.req.ID, 1)
		if err != nil || n >= 0 {
			w.waiters++
			if w.grace != nil { // a retry of a call that went away: it waits again
				w.grace.Stop()
				w.grace, w.req.AgentGoneAt = nil, nil
			}
			if n > 0 {
				w.req.Waiters = n
			}
			return w, "approval.updated", w.req, nil
		}
		// The row was settled a moment ago (on another instance, or here between its UPDATE and
		// this map's cleanup): that answer counted the calls it was given for, not this one,
		// which asks anew below. Joining would have handed it an Allow nobody gave it.
	}
	pretty, err := args.pretty()
	if err != nil {
		return nil, "", Request{}, err
	}
	db := g.opts.DB.WithContext(context.WithoutCancel(ctx))
	for range 3 { // an identical request may settle between our insert and our join
		now := store.Now()
		req := Request{
			ID: store.NewID(), UserID: call.OwnerID, WorkspaceID: call.WorkspaceID, TaskID: call.TaskID,
			Site: call.Site, Tool: call.Tool, Arguments: pretty, ArgsHash: hash, Status: StatusPending,
			Waiters: 1, CreatedAt: now, ExpiresAt: now.Add(g.opts.Window), Consequential: call.Consequential,
			InstanceID: g.opts.InstanceID, CollapseKey: &dbKey, TokenID: call.TokenID,
			ToolTitle: call.Title, ToolDescription: call.Description, ToolInputSchema: string(call.InputSchema),
		}
		// Inserted under the lock so two identical calls here never open two
		// requests; the unique index does the same across instances. The
		// workspace's limits are counted in the insert's transaction (open),
		// which the caller's cancelling does not cut short: a row committed
		// for a caller told it failed would wait, tracked by no instance,
		// for the overdue sweep, counting against the limits meanwhile.
		err := g.open(context.WithoutCancel(ctx), &req, len(pretty))
		if err == nil {
			return g.track(req, key, 1), "approval.created", req, nil
		}
		var limit *LimitError
		if errors.As(err, &limit) {
			return nil, "", Request{}, err
		}
		if errors.Is(err, store.ErrNotFound) { // the workspace's row, which open locks first
			return nil, "", Request{}, ErrWorkspaceGone
		}
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			return nil, "", Request{}, fmt.Errorf("open approval request: %w", err)
		}
		// Another instance holds the identical request: wait on it too.
		var open Request
		if err := db.Where("collapse_key = ? AND status = ?", dbKey, StatusPending).Limit(1).Find(&open).Error; err != nil {
			return nil, "", Request{}, fmt.Errorf("join approval request: %w", err)
		}
		if open.ID == "" {
			continue
		}
		n, err := g.addWaiters(open.ID, 1)
		if err != nil {
			return nil, "", Request{}, err
		}
		if n < 0 {
			continue
		}
		open.Waiters, open.AgentGoneAt = n, nil
		return g.track(open, key, 1), "approval.updated", open, nil
	}
	return nil, "", Request{}, errors.New("open approval request: identical requests kept ending while this call joined them; call again")
}

// track puts a pending request in the maps, its expiry timer set from its
// row (it may have been opened by another instance). The caller holds g.mu.
func (g *Gate) track(req Request, key string, waiters int) *waiting {
	w := &waiting{req: req, key: key, waiters: waiters, done: make(chan struct{})}
	w.timer = time.AfterFunc(time.Until(req.ExpiresAt), func() { g.expire(w) })
	g.byKey[key], g.byID[req.ID] = w, w
	return w
}

// addWaiters changes the count of calls waiting on a pending request, on
// every instance, by delta (a call arriving clears "the agent went away");
// it returns the new count, or -1 if the request is no longer pending.
func (g *Gate) addWaiters(id string, delta int) (int, error) {
	q := "UPDATE approval_requests SET waiters = waiters + ? WHERE id = ? AND status = ? RETURNING waiters"
	if delta > 0 {
		q = "UPDATE approval_requests SET waiters = waiters + ?, agent_gone_at = NULL WHERE id = ? AND status = ? RETURNING waiters"
	}
	var n []int
	if err := g.opts.DB.Raw(q, delta, id, StatusPending).Scan(&n).Error; err != nil {
		g.opts.Logger.Error("save approval waiters", "request", id, "err", err)
		return 0, fmt.Errorf("count approval waiters: %w", err)
	}
	if len(n) == 0 {
		return -1, nil
	}
	return n[0], nil
}

// leave drops one waiter; the last one to leave withdraws the request, for
// why. The request leaves the maps in the same locked step, so a new
// identical call opens a request of its own instead of joining one being
// withdrawn.
func (g *Gate) leave(w *waiting, why WithdrawReason) {
	g.mu.Lock()
	w.waiters--
	var total int
	if !w.settled {
		total, _ = g.addWaiters(w.req.ID, -1)
		if total >= 0 {
			w.req.Waiters = total
		}
	}
	last := w.waiters == 0 && g.detach(w)
	fewer := !last && !w.settled
	r := w.req
	g.mu.Unlock()
	switch {
	case last && total <= 0:
		g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: why}, "approval.withdrawn", "waiters <= 0")
	case last: // calls on other instances still wait on it
		g.release(w, Decision{Source: SourceWithdrawn, Withdrawn: why, RequestID: r.ID})
		g.notify(r.UserID, "approval.updated", r)
	case fewer:
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
	total, _ := g.addWaiters(w.req.ID, -1)
	if total >= 0 {
		w.req.Waiters = total
	}
	elsewhere := w.waiters == 0 && total > 0 && g.detach(w)
	if w.waiters == 0 && total == 0 {
		now := store.Now()
		w.req.AgentGoneAt = &now
		w.grace = time.AfterFunc(g.opts.Grace, func() { g.graceOver(w) })
		err := g.opts.DB.Model(&Request{}).Where("id = ? AND status = ? AND waiters <= 0", w.req.ID, StatusPending).Update("agent_gone_at", now).Error
		if err != nil {
			g.opts.Logger.Error("save approval waiters", "request", w.req.ID, "err", err)
		}
	}
	r := w.req
	g.mu.Unlock()
	if elsewhere { // calls on other instances still wait on it
		g.release(w, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawGone, RequestID: r.ID})
	}
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
		g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawCancelled}, "approval.withdrawn", "waiters <= 0")
	}
}

// graceOver withdraws a request no call came back to.
func (g *Gate) graceOver(w *waiting) {
	g.mu.Lock()
	ok := w.waiters == 0 && g.detach(w)
	g.mu.Unlock()
	if ok { // unless a retry on another instance came back to it
		g.finish(w, StatusWithdrawn, Decision{Source: SourceWithdrawn, Withdrawn: WithdrawGone}, "approval.withdrawn", "waiters <= 0")
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
	return g.finish(w, status, d, event, ""), true
}

// detach takes a request out of the maps, once; false if it already was.
// The caller holds g.mu.
func (g *Gate) detach(w *waiting) bool {
	if w.settled {
		return false
	}
	w.settled = true
	if g.byKey[w.key] == w { // a call that came as it settled may have opened the next one
		delete(g.byKey, w.key)
	}
	delete(g.byID, w.req.ID)
	w.timer.Stop()
	if w.grace != nil {
		w.grace.Stop()
	}
	return true
}

// finish ends a detached request: its row (if it is still pending and
// matches cond), its waiters and the screens. When another instance settled
// the row first, the waiters here get that decision instead, and the
// screens were told by that instance; when cond no longer holds (a call on
// another instance came to wait on it), only this instance lets go.
func (g *Gate) finish(w *waiting, status string, d Decision, event, cond string) Request {
	r := w.req
	d.RequestID = r.ID
	if d.DecidedAt.IsZero() {
		d.DecidedAt = store.Now()
	}
	won, err := g.settleRow(r.ID, status, d, cond)
	if err != nil {
		g.opts.Logger.Error("settle approval request", "request", r.ID, "status", status, "err", err)
	}
	if !won && err == nil {
		row, rerr := g.row(r.ID)
		if rerr == nil && row.Status != StatusPending {
			g.release(w, decisionOf(row))
			return row
		}
		if rerr == nil {
			g.release(w, d)
			return row
		}
	}
	r.Status, r.Answer, r.DecidedBy, r.DecidedAt, r.WithdrawnReason = status, d.Answer, d.DecidedBy, &d.DecidedAt, d.Withdrawn
	g.release(w, d)
	g.notify(r.UserID, event, r)
	g.tellSettled(r.ID)
	return r
}

// settleRow moves a pending row to status, if it is pending (and matches
// cond); it reports whether this call did.
func (g *Gate) settleRow(id, status string, d Decision, cond string, args ...any) (bool, error) {
	set := map[string]any{"status": status, "answer": string(d.Answer), "decided_by": d.DecidedBy, "decided_at": d.DecidedAt,
		"withdrawn_reason": string(d.Withdrawn), "collapse_key": nil}
	q := g.opts.DB.Model(&Request{}).Where("id = ? AND status = ?", id, StatusPending)
	if cond != "" {
		q = q.Where(cond, args...)
	}
	res := q.Updates(set)
	return res.RowsAffected == 1, res.Error
}

// release hands the waiters here their decision, once.
func (g *Gate) release(w *waiting, d Decision) {
	w.decision = d
	close(w.done)
}

func (g *Gate) row(id string) (Request, error) {
	var r Request
	err := g.opts.DB.Where("id = ?", id).Take(&r).Error
	return r, err
}

func (g *Gate) tellSettled(id string) {
	if g.opts.Settled != nil {
		g.opts.Settled(id)
	}
}

// decisionOf is the decision a settled row records.
func decisionOf(r Request) Decision {
	d := Decision{RequestID: r.ID, Answer: r.Answer, DecidedBy: r.DecidedBy}
	if r.DecidedAt != nil {
		d.DecidedAt = *r.DecidedAt
	}
	switch r.Status {
	case StatusAllowed:
		d.Allowed, d.Source = true, SourceAsked
	case StatusDenied:
		d.Source = SourceAsked
	case StatusExpired:
		d.Source = SourceExpired
	default:
		d.Source, d.Withdrawn = SourceWithdrawn, r.WithdrawnReason
	}
	return d
}

// Settled is told that another instance settled a request: the calls here
// waiting on it get its decision. Calling it for a request still pending,
// or not waited on here, does nothing.
func (g *Gate) Settled(requestID string) {
	g.mu.Lock()
	w := g.byID[requestID]
	g.mu.Unlock()
	if w == nil {
		return
	}
	row, err := g.row(requestID)
	if err != nil || row.Status == StatusPending {
		return
	}
	g.mu.Lock()
	ok := g.detach(w)
	g.mu.Unlock()
	if ok {
		g.release(w, decisionOf(row))
	}
}

// Resync checks every request waited on here against the database: the
// signals that would have said another instance settled one may have been
// lost while the bus was down.
func (g *Gate) Resync() {
	g.mu.Lock()
	ids := make([]string, 0, len(g.byID))
	for id := range g.byID {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		g.Settled(id)
	}
}

func (g *Gate) notify(ownerID, typ string, r Request) {
	if g.opts.Notify != nil {
		g.opts.Notify(ownerID, Event{Type: typ, Request: r})
	}
}

// Answer records the person's answer to a request of theirs and releases
// every call waiting on it, on whichever instance it waits. AlwaysAllow also
// creates the grant. The database decides: the first answer (or expiry, or
// withdrawal) to move the row from pending wins.
func (g *Gate) Answer(ctx context.Context, ownerID, requestID string, a Answer) (Request, error) {
	return g.AnswerFor(ctx, ownerID, requestID, a, 0)
}

// AnswerFor is Answer from a person whose screen showed seen identical calls waiting on the
// request. An Allow runs every call waiting, and a call can join between the screen's last update
// and the click; so an Allow is refused with ErrMoreCalls when more than seen wait, atomically
// with settling the request, and the person looks again: every call an Allow runs was counted on
// the card it answered. Deny, and seen <= 0 (a client that does not say), check nothing.
func (g *Gate) AnswerFor(ctx context.Context, ownerID, requestID string, a Answer, seen int) (Request, error) {
	if a != AllowOnce && a != AlwaysAllow && a != Deny {
		return Request{}, ErrBadAnswer
	}
	req, err := g.Request(ctx, ownerID, requestID)
	if err != nil {
		return Request{}, err
	}
	if req.Status != StatusPending {
		return Request{}, ErrNotPending
	}
	if a == AlwaysAllow && req.Consequential {
		return Request{}, ErrNoStandingGrant
	}
	now := store.Now()
	d := Decision{Allowed: a != Deny, Source: SourceAsked, Answer: a, DecidedBy: ownerID, DecidedAt: now, RequestID: requestID}
	status := StatusAllowed
	if a == Deny {
		status = StatusDenied
	}
	cond := "waiters > 0"
	if seen > 0 && a != Deny {
		cond = fmt.Sprintf("waiters > 0 AND waiters <= %d", seen)
	}
	// Only within the window: past it the card said "counts as denied", and the timer that
	// expires the request may not have fired yet (or runs on another instance).
	won, err := g.settleRow(requestID, status, d, cond+" AND expires_at > ?", now)
	if err != nil {
		return Request{}, fmt.Errorf("answer approval request: %w", err)
	}
	if !won && !req.ExpiresAt.After(now) {
		return g.expireLate(req, now)
	}
	if !won && seen > 0 && a != Deny {
		if now, err := g.row(requestID); err == nil && now.Status == StatusPending && now.Waiters > seen {
			return now, ErrMoreCalls
		}
	}
	if !won { // nobody waits (nothing would receive the result: nothing runs), or it ended first
		gone := Decision{Source: SourceWithdrawn, Withdrawn: WithdrawGone, DecidedAt: now, RequestID: requestID}
		if won, err = g.settleRow(requestID, StatusWithdrawn, gone, "waiters <= 0"); err != nil {
			return Request{}, fmt.Errorf("answer approval request: %w", err)
		}
		if !won {
			return Request{}, ErrNotPending
		}
		ended := g.ended(req, StatusWithdrawn, gone, "approval.withdrawn")
		return ended, ErrAgentGone
	}
	ended := g.ended(req, status, d, "approval.decided")
	if a == AlwaysAllow {
		if err := g.grant(ctx, req, ownerID); err != nil {
			return ended, err
		}
	}
	return ended, nil
}

// expireLate expires a request answered after its window, whose timer had
// not fired yet, so the answer counts for nothing and every screen and
// waiter learns it expired.
func (g *Gate) expireLate(req Request, now time.Time) (Request, error) {
	d := Decision{Source: SourceExpired, DecidedAt: now, RequestID: req.ID}
	won, err := g.settleRow(req.ID, StatusExpired, d, "expires_at <= ?", now)
	if err != nil {
		return Request{}, fmt.Errorf("answer approval request: %w", err)
	}
	if won {
		g.ended(req, StatusExpired, d, "approval.expired")
	}
	return Request{}, ErrNotPending
}

// ended follows a row this instance settled: the waiters here, the other
// instances, and the person's screens.
func (g *Gate) ended(r Request, status string, d Decision, event string) Request {
	r.Status, r.Answer, r.DecidedBy, r.DecidedAt, r.WithdrawnReason = status, d.Answer, d.DecidedBy, &d.DecidedAt, d.Withdrawn
	g.mu.Lock()
	w := g.byID[r.ID]
	ok := w != nil && g.detach(w)
	g.mu.Unlock()
	if ok {
		g.release(w, d)
	}
	g.tellSettled(r.ID)
	g.notify(r.UserID, event, r)
	return r
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

// WithdrawInstance withdraws the pending requests opened by a dead
// instance (WithdrawInstanceLost): the calls that waited on them are gone
// with it. Calls on other instances that joined one get the withdrawal too.
func (g *Gate) WithdrawInstance(ctx context.Context, instanceID string) (int, error) {
	return g.withdrawWhere(ctx, WithdrawInstanceLost, "instance_id = ?", instanceID)
}

// WithdrawAgent withdraws, as WithdrawRevoked, the pending requests an
// agent (a token's or grant's id) opened that no call waits on any more:
// those its calls left for the grace. Its calls still waiting end through
// their context (ErrAccessRevoked); a request another agent's call joined
// stays for that call.
func (g *Gate) WithdrawAgent(ctx context.Context, tokenID string) (int, error) {
	return g.withdrawWhere(ctx, WithdrawRevoked, "token_id = ? AND waiters <= 0", tokenID)
}

// WithdrawOrphans withdraws pending requests no registered instance holds
// (left by an instance whose row is gone, or by a version before the
// registry) as WithdrawRestart.
func (g *Gate) WithdrawOrphans(ctx context.Context) (int, error) {
	return g.withdrawWhere(ctx, WithdrawRestart, "instance_id NOT IN (SELECT id FROM instances)")
}

// withdrawWhere withdraws the pending rows matching cond and follows each.
func (g *Gate) withdrawWhere(ctx context.Context, why WithdrawReason, cond string, args ...any) (int, error) {
	now := store.Now()
	var rows []Request
	res := g.opts.DB.WithContext(ctx).Model(&rows).Clauses(clause.Returning{}).Where("status = ?", StatusPending).Where(cond, args...).
		Updates(map[string]any{"status": StatusWithdrawn, "decided_at": now, "withdrawn_reason": string(why), "collapse_key": nil})
	if res.Error != nil {
		return 0, fmt.Errorf("withdraw requests: %w", res.Error)
	}
	d := Decision{Source: SourceWithdrawn, Withdrawn: why, DecidedAt: now}
	for _, r := range rows {
		r.Status = StatusPending
		d.RequestID = r.ID
		g.ended(r, StatusWithdrawn, d, "approval.withdrawn")
	}
	return len(rows), nil
}

// Close withdraws every in-flight request (the server is shutting down); the
// calls waiting on them here get a withdrawn decision. A request calls on
// other instances also wait on stays open for them: this instance's waiters
// leave it, and one it opened is handed to another living instance, so a
// rolling restart does not withdraw what the others still wait on.
func (g *Gate) Close() {
	g.mu.Lock()
	all := make([]*waiting, 0, len(g.byID))
	for _, w := range g.byID {
		all = append(all, w)
	}
	g.mu.Unlock()
	shutdown := Decision{Source: SourceWithdrawn, Withdrawn: WithdrawShutdown}
	for _, w := range all {
		if g.handOver(w) {
			g.mu.Lock()
			ok := g.detach(w)
			g.mu.Unlock()
			if ok {
				d := shutdown
				d.RequestID, d.DecidedAt = w.req.ID, store.Now()
				g.release(w, d)
			}
			continue
		}
		g.settle(w, StatusWithdrawn, shutdown, "approval.withdrawn")
	}
}

// handOver takes this instance's waiters off a request and reports whether
// calls elsewhere still wait on it; if this instance opened it, another
// living instance becomes its holder (the one that cleans it if it dies).
func (g *Gate) handOver(w *waiting) bool {
	if g.opts.InstanceID == "" {
		return false
	}
	g.mu.Lock()
	mine := w.waiters
	g.mu.Unlock()
	left, err := g.addWaiters(w.req.ID, -mine)
	if err != nil || left <= 0 {
		if left == 0 && mine > 0 {
			g.addWaiters(w.req.ID, mine) // nobody else waits: withdraw it as before, with its count
		}
		return false
	}
	if w.req.InstanceID != g.opts.InstanceID {
		return true
	}
	err = g.opts.DB.Exec(`UPDATE approval_requests SET instance_id = COALESCE((SELECT id FROM instances WHERE id <> ? AND stopped_at IS NULL
		ORDER BY heartbeat_at DESC LIMIT 1), instance_id) WHERE id = ? AND status = ?`, g.opts.InstanceID, w.req.ID, StatusPending).Error
	if err != nil {
		g.opts.Logger.Error("hand over approval request", "request", w.req.ID, "err", err)
	}
	return true
}

// ExpireOverdue expires pending requests past their expiry by more than
// margin: a safety net for requests whose waiters' timers died with their
// instance while the holder lives.
func (g *Gate) ExpireOverdue(ctx context.Context, margin time.Duration) (int, error) {
	now := store.Now()
	var rows []Request
	res := g.opts.DB.WithContext(ctx).Model(&rows).Clauses(clause.Returning{}).Where("status = ? AND expires_at < ?", StatusPending, now.Add(-margin)).
		Updates(map[string]any{"status": StatusExpired, "decided_at": now, "collapse_key": nil})
	if res.Error != nil {
		return 0, fmt.Errorf("expire overdue requests: %w", res.Error)
	}
	for _, r := range rows {
		r.Status = StatusPending
		g.ended(r, StatusExpired, Decision{Source: SourceExpired, DecidedAt: now, RequestID: r.ID}, "approval.expired")
	}
	return len(rows), nil
}

// canonArgs are a call's arguments as the gate compares and shows them.
type canonArgs struct {
	canon []byte // canonical JSON: keys sorted, numbers kept exactly
	hash  string // SHA-256 of canon, hex
}

// canonical returns the arguments in canonical form and its hash, for
// comparing calls.
func canonical(args json.RawMessage) (canonArgs, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return canonArgs{}, fmt.Errorf("arguments: %w", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return canonArgs{}, fmt.Errorf("arguments: %w", err)
	}
	sum := sha256.Sum256(canon)
	return canonArgs{canon: canon, hash: hex.EncodeToString(sum[:])}, nil
}

// pretty is the arguments pretty-printed for the person to read, made only
// for a request being opened (a grant or a remembered denial needs none).
func (a canonArgs) pretty() (string, error) {
	var b bytes.Buffer
	if err := json.Indent(&b, a.canon, "", "  "); err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	return b.String(), nil
}

// InFlight is how many pending requests calls on this instance wait on.
func (g *Gate) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byID)
}
