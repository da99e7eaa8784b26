package approvals_test

import (
	"context"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// twoInstances gives a world a second gate on the same PostgreSQL
// database, as another server instance would have; each tells the other
// what it settled, as the signal bus does.
func twoInstances(t *testing.T) (*world, *approvals.Gate) {
	w := newWorld(t, storetest.Open(t, storetest.Postgres), time.Minute)
	var other *approvals.Gate
	w.gate = approvals.New(approvals.Options{DB: w.db, Window: time.Minute, InstanceID: "a",
		Notify:  func(_ string, e approvals.Event) { w.events <- e },
		Settled: func(id string) { go other.Settled(id) }})
	first := w.gate
	other = approvals.New(approvals.Options{DB: w.db, Window: time.Minute, InstanceID: "b",
		Settled: func(id string) { go first.Settled(id) }})
	return w, other
}

func receive(t *testing.T, c chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the call never got its decision")
		return result{}
	}
}

// TestIdenticalCallsCollapseAcrossInstances: the same call arriving at two
// instances asks the person once; one answer, given on either, runs both.
func TestIdenticalCallsCollapseAcrossInstances(t *testing.T) {
	w, b := twoInstances(t)
	ctx := context.Background()
	c := w.call("buy", `{"item":"tea"}`)
	onA := w.decideAsync(ctx, c)
	created := w.nextEvent(t, "approval.created")
	onB := make(chan result, 1)
	go func() { d, err := b.Decide(ctx, c); onB <- result{d, err} }()
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		p, _ := w.gate.Pending(ctx, w.owner, "")
		return len(p) == 1 && p[0].Waiters == 2
	}, "the condition holds")
	if p, _ := w.gate.Pending(ctx, w.owner, ""); len(p) != 1 || p[0].ID != created.Request.ID {
		t.Fatalf("pending %v, want the one request", p)
	}
	if _, err := b.Answer(ctx, w.owner, created.Request.ID, approvals.AllowOnce); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan result{"a": onA, "b": onB} {
		r := receive(t, ch)
		if r.err != nil || !r.d.Allowed || r.d.Source != approvals.SourceAsked {
			t.Fatalf("call on instance %s: %+v, %v; want allowed by the answer", name, r.d, r.err)
		}
	}
}

// TestAnswerOnAnotherInstance: the person's answer, given on an instance
// where no call waits, reaches the instance where it does.
func TestAnswerOnAnotherInstance(t *testing.T) {
	w, b := twoInstances(t)
	ctx := context.Background()
	onA := w.decideAsync(ctx, w.call("buy", `{}`))
	created := w.nextEvent(t, "approval.created")
	if _, err := b.Answer(ctx, w.owner, created.Request.ID, approvals.Deny); err != nil {
		t.Fatal(err)
	}
	r := receive(t, onA)
	if r.err != nil || r.d.Allowed || r.d.Answer != approvals.Deny {
		t.Fatalf("got %+v, %v; want denied", r.d, r.err)
	}
	if _, err := w.gate.Answer(ctx, w.owner, created.Request.ID, approvals.AllowOnce); err != approvals.ErrNotPending {
		t.Fatalf("second answer: %v, want ErrNotPending", err)
	}
}

// TestLeavingOnOneInstanceKeepsTheOthersCall: a call that gives up on one
// instance does not withdraw the request another instance's call waits on.
func TestLeavingOnOneInstanceKeepsTheOthersCall(t *testing.T) {
	w, b := twoInstances(t)
	ctx := context.Background()
	c := w.call("buy", `{"n":1}`)
	actx, cancel := context.WithCancel(ctx)
	onA := w.decideAsync(actx, c)
	created := w.nextEvent(t, "approval.created")
	onB := make(chan result, 1)
	go func() { d, err := b.Decide(ctx, c); onB <- result{d, err} }()
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		p, _ := w.gate.Pending(ctx, w.owner, "")
		return len(p) == 1 && p[0].Waiters == 2
	}, "the condition holds")
	cancel()
	if r := receive(t, onA); r.err == nil {
		t.Fatalf("cancelled call got %+v", r.d)
	}
	if p, _ := w.gate.Pending(ctx, w.owner, ""); len(p) != 1 || p[0].Waiters != 1 {
		t.Fatalf("pending %+v, want the request still open with one waiter", p)
	}
	if _, err := w.gate.Answer(ctx, w.owner, created.Request.ID, approvals.AllowOnce); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, onB); r.err != nil || !r.d.Allowed {
		t.Fatalf("call on b: %+v, %v", r.d, r.err)
	}
}

// TestDeadInstanceRequestsWithdrawn: a dead instance's requests are
// withdrawn with a reason the person reads, and its calls' waits end.
func TestDeadInstanceRequestsWithdrawn(t *testing.T) {
	w, b := twoInstances(t)
	ctx := context.Background()
	onA := w.decideAsync(ctx, w.call("buy", `{}`))
	created := w.nextEvent(t, "approval.created")
	n, err := b.WithdrawInstance(ctx, "a")
	if err != nil || n != 1 {
		t.Fatalf("withdrew %d, %v; want 1", n, err)
	}
	r := receive(t, onA)
	if r.d.Source != approvals.SourceWithdrawn || r.d.Withdrawn != approvals.WithdrawInstanceLost {
		t.Fatalf("got %+v", r.d)
	}
	got, err := w.gate.Request(ctx, w.owner, created.Request.ID)
	if err != nil || got.WithdrawnReason != approvals.WithdrawInstanceLost {
		t.Fatalf("row %+v, %v", got, err)
	}
	if n, _ := b.WithdrawInstance(ctx, "a"); n != 0 {
		t.Fatalf("second sweep withdrew %d", n)
	}
}

// TestShutdownHandsOverWhatOthersWaitOn: an instance shutting down (a
// rolling restart) withdraws only what nobody else waits on; a request a
// call on another instance also waits on stays open, now held by a living
// instance, and the person's answer still reaches that call.
func TestShutdownHandsOverWhatOthersWaitOn(t *testing.T) {
	w, b := twoInstances(t)
	ctx := context.Background()
	now := store.Now()
	for _, id := range []string{"a", "b"} {
		if err := w.db.Exec("INSERT INTO instances (id, address, started_at, heartbeat_at) VALUES (?, '', ?, ?)", id, now, now).Error; err != nil {
			t.Fatal(err)
		}
	}
	shared := w.call("buy", `{"shared":true}`)
	onA := w.decideAsync(ctx, shared)
	created := w.nextEvent(t, "approval.created")
	onB := make(chan result, 1)
	go func() { d, err := b.Decide(ctx, shared); onB <- result{d, err} }()
	testutil.Eventually(t, testutil.WaitShort, func() bool { p, _ := w.gate.Pending(ctx, w.owner, ""); return len(p) == 1 && p[0].Waiters == 2 }, "the condition holds")
	alone := w.decideAsync(ctx, w.call("buy", `{"alone":true}`))
	lonely := w.nextEvent(t, "approval.created")

	w.gate.Close()
	if r := receive(t, onA); r.d.Withdrawn != approvals.WithdrawShutdown {
		t.Fatalf("call on the instance going down: %+v", r.d)
	}
	if r := receive(t, alone); r.d.Withdrawn != approvals.WithdrawShutdown {
		t.Fatalf("its own call: %+v", r.d)
	}
	got, _ := b.Request(ctx, w.owner, created.Request.ID)
	if got.Status != approvals.StatusPending || got.InstanceID != "b" || got.Waiters != 1 {
		t.Fatalf("the shared request after the shutdown: %s held by %q with %d waiters", got.Status, got.InstanceID, got.Waiters)
	}
	if got, _ := b.Request(ctx, w.owner, lonely.Request.ID); got.Status != approvals.StatusWithdrawn {
		t.Fatalf("the request only it waited on: %s", got.Status)
	}
	if _, err := b.Answer(ctx, w.owner, created.Request.ID, approvals.AllowOnce); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, onB); r.err != nil || !r.d.Allowed {
		t.Fatalf("call on the other instance: %+v, %v", r.d, r.err)
	}
}

// TestOverdueRequestsExpire: a pending request past its expiry that no
// timer ends (its waiters' instance died, its holder lives) is expired by
// the sweep.
func TestOverdueRequestsExpire(t *testing.T) {
	w, b := twoInstances(t)
	ctx := context.Background()
	_ = w.decideAsync(ctx, w.call("buy", `{}`))
	created := w.nextEvent(t, "approval.created")
	if err := w.db.Exec("UPDATE approval_requests SET expires_at = ? WHERE id = ?", store.Now().Add(-time.Hour), created.Request.ID).Error; err != nil {
		t.Fatal(err)
	}
	if n, err := b.ExpireOverdue(ctx, time.Minute); err != nil || n != 1 {
		t.Fatalf("expired %d, %v", n, err)
	}
	if got, _ := b.Request(ctx, w.owner, created.Request.ID); got.Status != approvals.StatusExpired {
		t.Fatalf("status %s", got.Status)
	}
}

// TestCallJoiningASettledRequestAsksAgain: between an answer settling a request's row (here on
// another instance) and this instance hearing of it, an identical call arriving here opens a
// request of its own instead of joining the settled one: the Allow counted the calls it was given
// for, and must not run one that came after.
func TestCallJoiningASettledRequestAsksAgain(t *testing.T) {
	w := newWorld(t, storetest.Open(t, storetest.Postgres), time.Minute)
	held := make(chan string, 4) // b's "settled" signals, delivered to a when the test says
	w.gate = approvals.New(approvals.Options{DB: w.db, Window: time.Minute, InstanceID: "a",
		Notify: func(_ string, e approvals.Event) { w.events <- e }})
	a := w.gate
	b := approvals.New(approvals.Options{DB: w.db, Window: time.Minute, InstanceID: "b", Settled: func(id string) { held <- id }})
	ctx := context.Background()
	c := w.call("buy", `{"item":"tea"}`)
	first := w.decideAsync(ctx, c)
	created := w.nextEvent(t, "approval.created")
	if _, err := b.AnswerFor(ctx, w.owner, created.Request.ID, approvals.AllowOnce, 1); err != nil {
		t.Fatal(err)
	}
	second := w.decideAsync(ctx, c) // a has not heard of the answer yet
	again := w.nextEvent(t, "approval.created")
	if again.Request.ID == created.Request.ID {
		t.Fatal("the later call did not ask anew")
	}
	a.Settled(testutil.RequireReceive(t, testutil.WaitShort, held))
	if r := await(t, first); r.err != nil || !r.d.Allowed || r.d.RequestID != created.Request.ID {
		t.Fatalf("the counted call: %+v %v", r.d, r.err)
	}
	select {
	case r := <-second:
		t.Fatalf("the later call got %+v, %v from an answer that did not count it", r.d, r.err)
	default:
	}
	if _, err := a.Answer(ctx, w.owner, again.Request.ID, approvals.Deny); err != nil {
		t.Fatal(err)
	}
	if r := await(t, second); r.err != nil || r.d.Allowed || r.d.RequestID != again.Request.ID {
		t.Fatalf("the later call: %+v %v, want denied by its own request", r.d, r.err)
	}
}
