package approvals_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// withGrace replaces the world's gate by one with the given grace.
func (w *world) withGrace(grace time.Duration) {
	w.gate = approvals.New(approvals.Options{DB: w.db, Window: time.Minute, Grace: grace,
		Notify: func(_ string, e approvals.Event) { w.events <- e }})
}

// gone is a context whose cancellation says the agent went away.
func gone() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	return ctx, func() { cancel(approvals.ErrAgentGone) }
}

func TestAgentGoneKeepsTheRequestForTheGrace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		w.withGrace(time.Minute)
		ctx, leave := gone()
		ch := w.decideAsync(ctx, w.call("buy", `{"a":1}`))
		created := w.nextEvent(t, "approval.created")
		leave()
		if r := await(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the gone call: %+v", r)
		}
		ev := w.nextEvent(t, "approval.updated")
		if ev.Request.Waiters != 0 || ev.Request.AgentGoneAt == nil {
			t.Fatalf("updated request: %+v", ev.Request)
		}
		p, _ := w.gate.Pending(context.Background(), w.owner, "")
		if len(p) != 1 || p[0].AgentGoneAt == nil || p[0].Waiters != 0 {
			t.Fatalf("stored request: %+v", p)
		}
		// A retry, keys in another order, rejoins it.
		again := w.decideAsync(context.Background(), w.call("buy", `{ "a": 1 }`))
		ev = w.nextEvent(t, "approval.updated")
		if ev.Request.ID != created.Request.ID || ev.Request.Waiters != 1 || ev.Request.AgentGoneAt != nil {
			t.Fatalf("rejoined request: %+v", ev.Request)
		}
		if _, err := w.gate.Answer(context.Background(), w.owner, created.Request.ID, approvals.AllowOnce); err != nil {
			t.Fatal(err)
		}
		if r := await(t, again); !r.d.Allowed {
			t.Fatalf("the retry: %+v", r)
		}
	})
}

// TestGraceEndsInWithdrawal runs in a synctest bubble: the request of an
// agent that went away stays for exactly its grace on the bubble's clock.
func TestGraceEndsInWithdrawal(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		synctest.Test(t, func(t *testing.T) {
			const grace = 10 * time.Second
			w := newWorld(t, db, time.Minute)
			w.withGrace(grace)
			ctx, leave := gone()
			ch := w.decideAsync(ctx, w.call("buy", `{}`))
			w.nextEvent(t, "approval.created")
			leave()
			await(t, ch)
			time.Sleep(grace - time.Millisecond)
			synctest.Wait()
			if p, _ := w.gate.Pending(context.Background(), w.owner, ""); len(p) != 1 {
				t.Fatalf("%d requests pending before the grace ended, want 1", len(p))
			}
			time.Sleep(time.Millisecond)
			ev := w.nextEvent(t, "approval.withdrawn")
			if ev.Request.WithdrawnReason != approvals.WithdrawGone {
				t.Fatalf("withdrawn: %+v", ev.Request)
			}
		})
	})
}

func TestAnswerWhileNobodyWaitsRunsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		w.withGrace(time.Minute)
		ctx, leave := gone()
		ch := w.decideAsync(ctx, w.call("buy", `{}`))
		created := w.nextEvent(t, "approval.created")
		leave()
		await(t, ch)
		w.nextEvent(t, "approval.updated")
		r, err := w.gate.Answer(context.Background(), w.owner, created.Request.ID, approvals.AlwaysAllow)
		if !errors.Is(err, approvals.ErrAgentGone) || r.Status != approvals.StatusWithdrawn || r.WithdrawnReason != approvals.WithdrawGone {
			t.Fatalf("answer while nobody waits: %+v %v", r, err)
		}
		if gs, _ := w.gate.Grants(context.Background(), w.owner); len(gs) != 0 {
			t.Fatalf("an answer nobody waited for granted %+v", gs)
		}
	})
}

func TestWaitersAreCountedOnTheRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		a := w.decideAsync(context.Background(), w.call("buy", `{}`))
		w.nextEvent(t, "approval.created")
		ctx, cancel := context.WithCancel(context.Background())
		b := w.decideAsync(ctx, w.call("buy", `{}`))
		if ev := w.nextEvent(t, "approval.updated"); ev.Request.Waiters != 2 {
			t.Fatalf("after the second call: %+v", ev.Request)
		}
		if p, _ := w.gate.Pending(context.Background(), w.owner, ""); p[0].Waiters != 2 {
			t.Fatalf("stored waiters %d, want 2", p[0].Waiters)
		}
		cancel()
		await(t, b)
		if ev := w.nextEvent(t, "approval.updated"); ev.Request.Waiters != 1 {
			t.Fatalf("after one left: %+v", ev.Request)
		}
		w.gate.Close()
		await(t, a)
	})
}
