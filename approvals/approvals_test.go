package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type world struct {
	gate   *approvals.Gate
	db     *store.DB
	owner  string
	other  string
	ws     string
	task   string
	events chan approvals.Event
	done   context.Context // ends with the test, withdrawing any Decide still waiting
}

func newWorld(t *testing.T, db *store.DB, window time.Duration) *world {
	t.Helper()
	ctx := context.Background()
	u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
	o, _ := db.CreateUser(ctx, "b@example.com", "B", "hash")
	w, _ := db.CreateWorkspace(ctx, u.ID, "W")
	task, _ := db.CreateTask(ctx, store.NewTask{WorkspaceID: w.ID, Title: "T", CreatedBy: u.ID})
	if _, _, err := db.ShareSite(ctx, u.ID, w.ID, "https://shop.example"); err != nil { // a grant needs the site shared
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wd := &world{db: db, owner: u.ID, other: o.ID, ws: w.ID, task: task.ID, events: make(chan approvals.Event, 100), done: done}
	wd.gate = approvals.New(approvals.Options{DB: db, Window: window, Notify: func(_ string, e approvals.Event) { wd.events <- e }})
	return wd
}

func (w *world) call(tool string, args string) approvals.Call {
	return approvals.Call{OwnerID: w.owner, WorkspaceID: w.ws, TaskID: w.task, Site: "https://shop.example", Tool: tool, Arguments: json.RawMessage(args)}
}

// decideAsync starts a Decide and returns where its answer will arrive. A
// Decide nobody answered is withdrawn when the test ends.
func (w *world) decideAsync(ctx context.Context, c approvals.Call) chan result {
	out := make(chan result, 1)
	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(w.done, cancel)
	go func() {
		defer cancel()
		d, err := w.gate.Decide(ctx, c)
		out <- result{d, err}
	}()
	return out
}

type result struct {
	d   approvals.Decision
	err error
}

// nextEvent returns the next event, which must be of type typ; updates of
// a request's waiters are passed over unless typ asks for one.
func (w *world) nextEvent(t *testing.T, typ string) approvals.Event {
	t.Helper()
	deadline := time.After(testutil.WaitShort)
	for {
		select {
		case e := <-w.events:
			if e.Type == "approval.updated" && typ != e.Type {
				continue
			}
			if e.Type != typ {
				t.Fatalf("event %s, want %s", e.Type, typ)
			}
			return e
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}

func await(t *testing.T, ch chan result) result {
	t.Helper()
	return testutil.RequireReceive(t, testutil.WaitShort, ch)
}

func TestReadOnlyRunsAndWritesNeedATask(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		c := w.call("search", `{"q":"x"}`)
		c.ReadOnly = true
		c.TaskID = ""
		d, err := w.gate.Decide(ctx, c)
		if err != nil || !d.Allowed || d.Source != approvals.SourceReadOnly {
			t.Fatalf("read-only: %+v %v", d, err)
		}
		c = w.call("buy", `{}`)
		c.TaskID = ""
		if _, err := w.gate.Decide(ctx, c); !errors.Is(err, approvals.ErrTaskRequired) {
			t.Fatalf("write without task: %v", err)
		}
		other, _ := db.CreateWorkspace(ctx, w.owner, "Other")
		foreign, _ := db.CreateTask(ctx, store.NewTask{WorkspaceID: other.ID, Title: "F", CreatedBy: w.owner})
		c.TaskID = foreign.ID
		if _, err := w.gate.Decide(ctx, c); !errors.Is(err, approvals.ErrNoSuchTask) {
			t.Fatalf("write with another workspace's task: %v", err)
		}
		if p, _ := w.gate.Pending(ctx, w.owner, ""); len(p) != 0 {
			t.Fatalf("requests opened: %d", len(p))
		}
	})
}

func TestAllowOnceAsksAgainNextTime(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		ch := w.decideAsync(ctx, w.call("buy", `{"item":"tea","qty":2}`))
		ev := w.nextEvent(t, "approval.created")
		if ev.Request.Arguments != "{\n  \"item\": \"tea\",\n  \"qty\": 2\n}" {
			t.Fatalf("arguments shown as %q", ev.Request.Arguments)
		}
		pend, _ := w.gate.Pending(ctx, w.owner, w.task)
		if len(pend) != 1 || pend[0].ID != ev.Request.ID {
			t.Fatalf("pending: %+v", pend)
		}
		if _, err := w.gate.Answer(ctx, w.other, ev.Request.ID, approvals.AllowOnce); !errors.Is(err, approvals.ErrNotFound) {
			t.Fatalf("another person answered: %v", err)
		}
		if _, err := w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AllowOnce); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch)
		if r.err != nil || !r.d.Allowed || r.d.Source != approvals.SourceAsked || r.d.DecidedBy != w.owner {
			t.Fatalf("after allow once: %+v %v", r.d, r.err)
		}
		w.nextEvent(t, "approval.decided")
		if _, err := w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.Deny); !errors.Is(err, approvals.ErrNotPending) {
			t.Fatalf("second answer: %v", err)
		}
		// The same call again asks again.
		ch = w.decideAsync(ctx, w.call("buy", `{"qty":2,"item":"tea"}`))
		ev2 := w.nextEvent(t, "approval.created")
		if ev2.Request.ID == ev.Request.ID {
			t.Fatal("allow once was remembered")
		}
		w.gate.Answer(ctx, w.owner, ev2.Request.ID, approvals.Deny)
		r = await(t, ch)
		if r.err != nil || r.d.Allowed || r.d.Answer != approvals.Deny {
			t.Fatalf("deny: %+v %v", r.d, r.err)
		}
	})
}

func TestAlwaysAllowGrantsUntilRevoked(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		ch := w.decideAsync(ctx, w.call("buy", `{"a":1}`))
		ev := w.nextEvent(t, "approval.created")
		w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AlwaysAllow)
		if r := await(t, ch); !r.d.Allowed || r.d.Source != approvals.SourceAsked {
			t.Fatalf("always allow: %+v", r.d)
		}
		d, err := w.gate.Decide(ctx, w.call("buy", `{"a":2}`))
		if err != nil || !d.Allowed || d.Source != approvals.SourceGrant {
			t.Fatalf("after grant: %+v %v", d, err)
		}
		grants, _ := w.gate.Grants(ctx, w.owner)
		if len(grants) != 1 || grants[0].Tool != "buy" {
			t.Fatalf("grants: %+v", grants)
		}
		if err := w.gate.RevokeGrant(ctx, w.other, grants[0].ID); !errors.Is(err, approvals.ErrNotFound) {
			t.Fatalf("another person revoked: %v", err)
		}
		if err := w.gate.RevokeGrant(ctx, w.owner, grants[0].ID); err != nil {
			t.Fatal(err)
		}
		w.nextEvent(t, "approval.decided")
		ch = w.decideAsync(ctx, w.call("buy", `{"a":3}`))
		w.nextEvent(t, "approval.created")
		w.gate.Close()
		if r := await(t, ch); r.d.Allowed || r.d.Source != approvals.SourceWithdrawn {
			t.Fatalf("after revoke and shutdown: %+v", r.d)
		}
	})
}

func TestIdenticalCallsCollapse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		var chans []chan result
		for i := 0; i < 3; i++ {
			chans = append(chans, w.decideAsync(ctx, w.call("buy", `{"item":"tea"}`)))
		}
		ev := w.nextEvent(t, "approval.created")
		// A different argument is a different question.
		diff := w.decideAsync(ctx, w.call("buy", `{"item":"coffee"}`))
		ev2 := w.nextEvent(t, "approval.created")
		// All three join the one request before it is answered.
		testutil.Eventually(t, testutil.WaitShort, func() bool { return w.gate.Waiters(ev.Request.ID) == 3 }, "the request never had 3 waiters")
		if pend, _ := w.gate.Pending(ctx, w.owner, ""); len(pend) != 2 {
			t.Fatalf("%d requests pending, want 2", len(pend))
		}
		w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AllowOnce)
		for _, ch := range chans {
			if r := await(t, ch); !r.d.Allowed || r.d.RequestID != ev.Request.ID {
				t.Fatalf("collapsed call: %+v", r.d)
			}
		}
		w.gate.Answer(ctx, w.owner, ev2.Request.ID, approvals.Deny)
		if r := await(t, diff); r.d.Allowed {
			t.Fatal("different arguments shared the answer")
		}
	})
}

// TestUnansweredRequestExpires runs in a synctest bubble: the request
// waits its whole default window of five minutes of the bubble's clock, not
// a shortened one of real time, and is still waiting a moment before it ends.
func TestUnansweredRequestExpires(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		synctest.Test(t, func(t *testing.T) {
			w := newWorld(t, db, 0) // the gate's default window
			window := w.gate.Window()
			ctx := context.Background()
			ch := w.decideAsync(ctx, w.call("buy", `{}`))
			ev := w.nextEvent(t, "approval.created")
			time.Sleep(window - time.Millisecond)
			synctest.Wait()
			select {
			case r := <-ch:
				t.Fatalf("decided before the window ended: %+v", r)
			default:
			}
			time.Sleep(time.Millisecond)
			r := await(t, ch)
			if r.err != nil || r.d.Allowed || r.d.Source != approvals.SourceExpired {
				t.Fatalf("expired: %+v %v", r.d, r.err)
			}
			w.nextEvent(t, "approval.expired")
			reqs, _ := w.gate.TaskRequests(ctx, w.owner, w.task)
			if len(reqs) != 1 || reqs[0].ID != ev.Request.ID || reqs[0].Status != approvals.StatusExpired {
				t.Fatalf("stored request: %+v", reqs)
			}
		})
	})
}

func TestCancelledCallWithdrawsItsRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		keep := w.decideAsync(context.Background(), w.call("buy", `{}`))
		ch := w.decideAsync(ctx, w.call("buy", `{}`))
		ev := w.nextEvent(t, "approval.created")
		testutil.Eventually(t, testutil.WaitShort, func() bool { return w.gate.Waiters(ev.Request.ID) == 2 }, "the request never had 2 waiters")
		cancel()
		if r := await(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled call: %+v", r)
		}
		// One identical call still waits: the request stays.
		if p, _ := w.gate.Pending(context.Background(), w.owner, ""); len(p) != 1 {
			t.Fatalf("pending after one of two left: %d", len(p))
		}
		w.gate.Close()
		if r := await(t, keep); r.d.Source != approvals.SourceWithdrawn {
			t.Fatalf("shutdown: %+v", r.d)
		}
		w.nextEvent(t, "approval.withdrawn")
		if p, _ := w.gate.Pending(context.Background(), w.owner, ""); len(p) != 0 {
			t.Fatalf("pending after withdraw: %d", len(p))
		}
	})
}

func TestStaleRequestsWithdrawnAtStart(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		w.decideAsync(ctx, w.call("buy", `{}`))
		w.nextEvent(t, "approval.created")
		// A new server on the same database (the old one was killed).
		fresh := approvals.New(approvals.Options{DB: db})
		n, err := fresh.WithdrawStale(ctx)
		if err != nil || n != 1 {
			t.Fatalf("withdrew %d (%v), want 1", n, err)
		}
		if p, _ := fresh.Pending(ctx, w.owner, ""); len(p) != 0 {
			t.Fatalf("still pending: %+v", p)
		}
	})
}

func TestAskForEveryToolMakesReadOnlyAsk(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		if err := w.gate.SetAskAll(ctx, w.owner, "https://shop.example", true); err != nil {
			t.Fatal(err)
		}
		c := w.call("search", `{}`)
		c.ReadOnly = true
		ch := w.decideAsync(ctx, c)
		ev := w.nextEvent(t, "approval.created")
		w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AllowOnce)
		if r := await(t, ch); !r.d.Allowed || r.d.Source != approvals.SourceAsked {
			t.Fatalf("ask-all read-only: %+v", r.d)
		}
		w.gate.SetAskAll(ctx, w.owner, "https://shop.example", false)
		if d, _ := w.gate.Decide(ctx, c); d.Source != approvals.SourceReadOnly {
			t.Fatalf("after turning it off: %+v", d)
		}
	})
}

func TestForgettingASiteRevokesItsGrantsAndWithdrawsItsRequests(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		ch := w.decideAsync(ctx, w.call("buy", `{}`))
		ev := w.nextEvent(t, "approval.created")
		w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AlwaysAllow)
		await(t, ch)
		w.nextEvent(t, "approval.decided")
		waitingCh := w.decideAsync(ctx, w.call("sell", `{}`))
		w.nextEvent(t, "approval.created")
		if err := w.gate.ForgetSite(ctx, w.owner, "", "https://shop.example"); err != nil {
			t.Fatal(err)
		}
		if r := await(t, waitingCh); r.d.Allowed || r.d.Source != approvals.SourceWithdrawn {
			t.Fatalf("waiting request after unsharing: %+v", r.d)
		}
		if gs, _ := w.gate.Grants(ctx, w.owner); len(gs) != 0 {
			t.Fatalf("grants after unsharing: %+v", gs)
		}
	})
}

// TestWithdrawnRequestsSayWhy: a withdrawn request records its reason, on
// its row and in the event the person's screens get, so the page can say
// whether the agent gave up, the site was unshared or the server stopped.
func TestWithdrawnRequestsSayWhy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		stored := func(id string) approvals.Request {
			t.Helper()
			reqs, err := w.gate.TaskRequests(ctx, w.owner, w.task)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				if r.ID == id {
					return r
				}
			}
			t.Fatalf("request %s not stored", id)
			return approvals.Request{}
		}
		check := func(what string, ev approvals.Event, want approvals.WithdrawReason) {
			t.Helper()
			if ev.Request.WithdrawnReason != want {
				t.Errorf("%s: event says %q, want %q", what, ev.Request.WithdrawnReason, want)
			}
			if r := stored(ev.Request.ID); r.Status != approvals.StatusWithdrawn || r.WithdrawnReason != want {
				t.Errorf("%s: stored as %s/%q, want withdrawn/%q", what, r.Status, r.WithdrawnReason, want)
			}
		}

		cctx, cancel := context.WithCancel(ctx)
		ch := w.decideAsync(cctx, w.call("buy", `{}`))
		w.nextEvent(t, "approval.created")
		cancel()
		await(t, ch)
		check("the agent gave up", w.nextEvent(t, "approval.withdrawn"), approvals.WithdrawCancelled)

		ch = w.decideAsync(ctx, w.call("sell", `{}`))
		w.nextEvent(t, "approval.created")
		if err := w.gate.ForgetSite(ctx, w.owner, w.ws, "https://shop.example"); err != nil {
			t.Fatal(err)
		}
		await(t, ch)
		check("unshared", w.nextEvent(t, "approval.withdrawn"), approvals.WithdrawUnshared)

		ch = w.decideAsync(ctx, w.call("keep", `{}`))
		w.nextEvent(t, "approval.created")
		w.gate.Close()
		await(t, ch)
		check("shutdown", w.nextEvent(t, "approval.withdrawn"), approvals.WithdrawShutdown)

		// Answered requests have no reason.
		ch = w.decideAsync(ctx, w.call("pay", `{}`))
		ev := w.nextEvent(t, "approval.created")
		if _, err := w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.Deny); err != nil {
			t.Fatal(err)
		}
		await(t, ch)
		w.nextEvent(t, "approval.decided")
		if r := stored(ev.Request.ID); r.WithdrawnReason != "" {
			t.Errorf("a denied request has withdrawn reason %q", r.WithdrawnReason)
		}

		// A request an earlier run left pending: withdrawn at start.
		w.decideAsync(ctx, w.call("stale", `{}`))
		stale := w.nextEvent(t, "approval.created").Request
		fresh := approvals.New(approvals.Options{DB: db})
		if n, err := fresh.WithdrawStale(ctx); err != nil || n != 1 {
			t.Fatalf("withdrew %d (%v), want 1", n, err)
		}
		if r := stored(stale.ID); r.Status != approvals.StatusWithdrawn || r.WithdrawnReason != approvals.WithdrawRestart {
			t.Errorf("stale request stored as %s/%q, want withdrawn/restart", r.Status, r.WithdrawnReason)
		}
		w.gate.Close()
	})
}

// TestAnAnswerAfterTheWindowRunsNothing: the window's end is the row's expires_at, and the card
// says the request then counts as denied; the timer that expires it fires a moment later, or on
// another instance (whose clock or pause may put it later still). An Allow in between allowed
// the call. It now finds the request expired: the answer counts for nothing, the waiting call
// gets the expiry, and every screen is told.
func TestAnAnswerAfterTheWindowRunsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Hour)
		ch := w.decideAsync(context.Background(), w.call("buy", `{}`))
		id := w.nextEvent(t, "approval.created").Request.ID
		// The window ended a second ago; this instance's timer is an hour away.
		if err := db.Model(&approvals.Request{}).Where("id = ?", id).Update("expires_at", store.Now().Add(-time.Second)).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := w.gate.AnswerFor(context.Background(), w.owner, id, approvals.AllowOnce, 1); !errors.Is(err, approvals.ErrNotPending) {
			t.Fatalf("an Allow after the window: %v, want ErrNotPending", err)
		}
		r := await(t, ch)
		if r.err != nil || r.d.Allowed || r.d.Source != approvals.SourceExpired {
			t.Fatalf("the waiting call got %+v %v, want the expiry", r.d, r.err)
		}
		w.nextEvent(t, "approval.expired")
		if req, _ := w.gate.Request(context.Background(), w.owner, id); req.Status != approvals.StatusExpired {
			t.Fatalf("the request is %s", req.Status)
		}
	})
}
