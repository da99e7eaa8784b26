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

// TestConsequentialAlwaysAsks: a tool the site marks consequentialHint asks every time, even with
// a grant for it and even if it also claims read-only, and its request cannot be always allowed.
func TestConsequentialAlwaysAsks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		w := newWorld(t, db, time.Minute)
		ctx := context.Background()
		// A grant from before the site marked the tool consequential.
		ch := w.decideAsync(ctx, w.call("post", `{}`))
		w.gate.Answer(ctx, w.owner, w.nextEvent(t, "approval.created").Request.ID, approvals.AlwaysAllow)
		await(t, ch)
		w.nextEvent(t, "approval.decided")

		c := w.call("post", `{"text":"hi"}`)
		c.Consequential, c.ReadOnly = true, true
		noTask := c
		noTask.TaskID = ""
		if _, err := w.gate.Decide(ctx, noTask); !errors.Is(err, approvals.ErrTaskRequired) {
			t.Fatalf("without a task: %v", err)
		}
		ch = w.decideAsync(ctx, c)
		ev := w.nextEvent(t, "approval.created")
		if !ev.Request.Consequential {
			t.Fatalf("the request does not say it is consequential: %+v", ev.Request)
		}
		if _, err := w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AlwaysAllow); !errors.Is(err, approvals.ErrNoStandingGrant) {
			t.Fatalf("always allow: %v", err)
		}
		w.gate.Answer(ctx, w.owner, ev.Request.ID, approvals.AllowOnce)
		if r := await(t, ch); !r.d.Allowed || r.d.Source != approvals.SourceAsked {
			t.Fatalf("allow once: %+v", r.d)
		}
		stored, err := w.gate.Request(ctx, w.owner, ev.Request.ID)
		if err != nil || !stored.Consequential {
			t.Fatalf("stored request: %+v %v", stored, err)
		}
	})
}
