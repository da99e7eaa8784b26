package approvals_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// deny opens a request for c, has the owner deny it, and returns it.
func (w *world) deny(t *testing.T, c approvals.Call) approvals.Request {
	t.Helper()
	ch := w.decideAsync(context.Background(), c)
	ev := w.nextEvent(t, "approval.created")
	if _, err := w.gate.Answer(context.Background(), w.owner, ev.Request.ID, approvals.Deny); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); r.err != nil || r.d.Allowed || r.d.Source != approvals.SourceAsked {
		t.Fatalf("denied: %+v %v", r.d, r.err)
	}
	w.nextEvent(t, "approval.decided")
	return ev.Request
}

// decideNow decides a call that must not wait for the person.
func (w *world) decideNow(t *testing.T, c approvals.Call) approvals.Decision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := w.gate.Decide(ctx, c)
	if err != nil {
		t.Fatalf("decide %s %s: %v (it waited for an answer nobody gives)", c.Tool, c.Arguments, err)
	}
	return d
}

// asks checks that c opens a new request (rather than being answered from
// memory), then withdraws it.
func (w *world) asks(t *testing.T, c approvals.Call, why string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := w.decideAsync(ctx, c)
	select {
	case e := <-w.events:
		if e.Type != "approval.created" {
			t.Fatalf("%s: event %s, want approval.created", why, e.Type)
		}
	case r := <-ch:
		t.Fatalf("%s: decided without asking: %+v %v", why, r.d, r.err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no request opened", why)
	}
	cancel()
	await(t, ch)
	w.nextEvent(t, "approval.withdrawn")
}

// TestADenialIsRemembered: the person's Deny answers the same call again in
// the same task at once, without asking them; other arguments, another task,
// and the same call after the person let it go are asked.
func TestADenialIsRemembered(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		denied := w.deny(t, w.call("buy", `{"item":"tea","qty":2}`))

		// The same call, its keys in another order: refused from memory.
		d := w.decideNow(t, w.call("buy", `{"qty":2, "item":"tea"}`))
		if d.Allowed || d.Source != approvals.SourceRemembered || d.RequestID != denied.ID || d.Answer != approvals.Deny ||
			d.DecidedBy != w.owner || d.DecidedAt.IsZero() {
			t.Fatalf("the denied call again: %+v, want refused as remembered from %s", d, denied.ID)
		}
		if p, _ := w.gate.Pending(ctx, w.owner, ""); len(p) != 0 {
			t.Fatalf("a remembered denial opened a request: %+v", p)
		}
		select {
		case e := <-w.events:
			t.Fatalf("a remembered denial told the person's screens %s", e.Type)
		default:
		}

		// A remembered denial outranks a grant of the tool given later for
		// another call: the person said no to exactly this one.
		ch := w.decideAsync(ctx, w.call("buy", `{"item":"milk"}`))
		ev := w.nextEvent(t, "approval.created")
		if _, err := w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AlwaysAllow); err != nil {
			t.Fatal(err)
		}
		if r := await(t, ch); !r.d.Allowed {
			t.Fatalf("always allowed: %+v %v", r.d, r.err)
		}
		w.nextEvent(t, "approval.decided")
		if d := w.decideNow(t, w.call("buy", `{"item":"coffee"}`)); !d.Allowed || d.Source != approvals.SourceGrant {
			t.Fatalf("other arguments under the grant: %+v", d)
		}
		if d := w.decideNow(t, w.call("buy", `{"item":"tea","qty":2}`)); d.Allowed || d.Source != approvals.SourceRemembered {
			t.Fatalf("the denied call under a later grant: %+v, want still refused", d)
		}
		grants, _ := w.gate.Grants(ctx, w.owner)
		for _, g := range grants {
			if err := w.gate.RevokeGrant(ctx, w.owner, g.ID); err != nil {
				t.Fatal(err)
			}
		}

		// Another task is another piece of work: asked.
		other, err := db.CreateTask(ctx, store.NewTask{WorkspaceID: w.ws, Title: "U", CreatedBy: w.owner})
		if err != nil {
			t.Fatal(err)
		}
		c := w.call("buy", `{"item":"tea","qty":2}`)
		c.TaskID = other.ID
		w.asks(t, c, "the denied call in another task")
		w.asks(t, w.call("buy", `{"item":"tea","qty":3}`), "other arguments")
		w.asks(t, w.call("sell", `{"item":"tea","qty":2}`), "another tool")

		// Only its owner lets it go, once.
		if _, err := w.gate.ForgetDenial(ctx, w.other, denied.ID); !errors.Is(err, approvals.ErrNotFound) {
			t.Fatalf("another person let the denial go: %v", err)
		}
		r, err := w.gate.ForgetDenial(ctx, w.owner, denied.ID)
		if err != nil || r.ForgottenAt == nil || r.Remembered() {
			t.Fatalf("let go: %+v %v", r, err)
		}
		if e := w.nextEvent(t, "approval.updated"); e.Request.ID != denied.ID || e.Request.ForgottenAt == nil {
			t.Fatalf("the screens were told %+v", e.Request)
		}
		if _, err := w.gate.ForgetDenial(ctx, w.owner, denied.ID); !errors.Is(err, approvals.ErrNotRemembered) {
			t.Fatalf("let go twice: %v", err)
		}
		w.asks(t, w.call("buy", `{"item":"tea","qty":2}`), "the denied call after the person let it go")
	})
}

// TestOnlyADenialIsRemembered: nobody said no to an expired or withdrawn
// request, nor to an allowed one, so the same call is asked again.
func TestOnlyADenialIsRemembered(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		w.asks(t, w.call("buy", `{"item":"tea"}`), "a first call")
		w.asks(t, w.call("buy", `{"item":"tea"}`), "the same call after its request was withdrawn")

		ch := w.decideAsync(ctx, w.call("buy", `{"item":"jam"}`))
		ev := w.nextEvent(t, "approval.created")
		if _, err := w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AllowOnce); err != nil {
			t.Fatal(err)
		}
		await(t, ch)
		w.nextEvent(t, "approval.decided")
		if _, err := w.gate.ForgetDenial(ctx, w.owner, ev.Request.ID); !errors.Is(err, approvals.ErrNotRemembered) {
			t.Fatalf("let an allowed request go: %v", err)
		}
		w.asks(t, w.call("buy", `{"item":"jam"}`), "the same call after Allow once")
	})
}

// TestUnsharingForgetsDenials: stopping sharing a site starts it over, as it
// does for grants: shared again, a call denied before is asked.
func TestUnsharingForgetsDenials(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		denied := w.deny(t, w.call("buy", `{"item":"tea"}`))
		if err := w.gate.ForgetSite(ctx, w.owner, w.ws, "https://shop.example"); err != nil {
			t.Fatal(err)
		}
		r, err := w.gate.Request(ctx, w.owner, denied.ID)
		if err != nil || r.Remembered() {
			t.Fatalf("after unsharing, the denial: %+v %v", r, err)
		}
		w.asks(t, w.call("buy", `{"item":"tea"}`), "a call denied before the site was unshared")
	})
}
