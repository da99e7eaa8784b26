package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// ownerCap is one per-owner cap as a burst test drives it: make creates one
// row of a fresh owner's through db (the i-th of the burst), under a cap of
// max; count counts the owner's live rows through setup.
type ownerCap struct {
	kind  string
	make  func(db *store.DB, o capOwner, i, max int) error
	count func(t *testing.T, setup *store.DB, o capOwner) int
}

// capOwner is a fresh person with a workspace, for one burst.
type capOwner struct {
	user, workspace string
}

var ownerCaps = []ownerCap{
	{
		kind: store.LimitWorkspaces,
		make: func(db *store.DB, o capOwner, i, max int) error {
			_, err := db.CreateWorkspaceUpTo(context.Background(), o.user, fmt.Sprintf("W%d", i), max)
			return err
		},
		count: func(t *testing.T, setup *store.DB, o capOwner) int {
			ws, err := setup.Workspaces(context.Background(), o.user)
			must(t, err)
			return len(ws)
		},
	},
	{
		kind: store.LimitAgentTokens,
		make: func(db *store.DB, o capOwner, i, max int) error {
			_, _, err := db.CreateAgentTokenUpTo(context.Background(), o.user, o.workspace, fmt.Sprintf("T%d", i), nil, max)
			return err
		},
		count: func(t *testing.T, setup *store.DB, o capOwner) int {
			ts, err := setup.AgentTokens(context.Background(), o.user, o.workspace)
			must(t, err)
			return len(ts)
		},
	},
	{
		kind: store.LimitMachines,
		make: func(db *store.DB, o capOwner, i, max int) error {
			_, _, err := db.CreateMachineUpTo(context.Background(), o.user, fmt.Sprintf("M%d", i), max)
			return err
		},
		count: func(t *testing.T, setup *store.DB, o capOwner) int {
			ms, err := setup.Machines(context.Background(), o.user)
			must(t, err)
			return len(ms)
		},
	},
	{
		kind: store.LimitSharedSites,
		make: func(db *store.DB, o capOwner, i, max int) error {
			_, _, err := db.ShareSiteUpTo(context.Background(), o.user, o.workspace, fmt.Sprintf("https://s%d.example", i), max)
			return err
		},
		count: func(t *testing.T, setup *store.DB, o capOwner) int {
			ss, err := setup.SharedSites(context.Background(), o.user)
			must(t, err)
			return len(ss)
		},
	},
	{
		kind: store.LimitInvitations,
		make: func(db *store.DB, o capOwner, i, max int) error {
			_, _, err := db.CreateInvitationUpTo(context.Background(), o.user, fmt.Sprintf("I%d", i), time.Hour, max)
			return err
		},
		count: func(t *testing.T, setup *store.DB, o capOwner) int {
			is, err := setup.Invitations(context.Background(), o.user)
			must(t, err)
			return len(is)
		},
	},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ownerCapRounds bursts per cap and database; each is a fresh person with
// fresh handles (see capRounds and capInstances).
const ownerCapRounds = 3

// Every per-owner cap holds with several instances creating at once, each
// through its own connections: exactly the cap are made, the rest refused
// with LimitError, on both databases. Without the owner's lock (a count and
// an insert in a plain transaction, or none) the bursts pass the cap.
func TestOwnerCapsHoldAcrossInstances(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		ctx := context.Background()
		const max, perInstance = 5, 2
		setup, opts := storetest.Shared(t, k)
		for _, oc := range ownerCaps {
			t.Run(oc.kind, func(t *testing.T) {
				for round := range ownerCapRounds {
					u, err := setup.CreateUser(ctx, fmt.Sprintf("%s-%d@example.com", oc.kind[:3], round), "P", "hash")
					must(t, err)
					o := capOwner{user: u.ID}
					if oc.kind != store.LimitWorkspaces { // that one's burst makes them
						w, err := setup.CreateWorkspace(ctx, u.ID, "W")
						must(t, err)
						o.workspace = w.ID
					}
					dbs := openInstances(t, opts)
					var creates []func() error
					for i, db := range dbs {
						for j := range perInstance {
							n := i*perInstance + j
							creates = append(creates, func() error { return oc.make(db, o, n, max) })
						}
					}
					made, refused := limitRace(t, oc.kind, max, creates)
					for _, db := range dbs {
						db.Close()
					}
					if made != max || refused != len(creates)-max {
						t.Fatalf("burst %d: %d creates over %d instances at a cap of %d: %d made, %d refused", round+1, len(creates), len(dbs), max, made, refused)
					}
					if n := oc.count(t, setup, o); n != max {
						t.Fatalf("burst %d: %d %s, want the cap of %d", round+1, n, oc.kind, max)
					}
				}
			})
		}
	})
}

// openInstances opens capInstances handles on one database, as that many
// server instances sharing it.
func openInstances(t *testing.T, opts store.Options) []*store.DB {
	t.Helper()
	var dbs []*store.DB
	for i := range capInstances {
		db, err := store.Open(context.Background(), opts)
		if err != nil {
			for _, d := range dbs {
				d.Close()
			}
			t.Fatalf("open instance %d: %v", i, err)
		}
		dbs = append(dbs, db)
	}
	return dbs
}

// limitRace runs every create at once, released together, and tells how
// many were made and how many refused at the cap of kind.
func limitRace(t *testing.T, kind string, max int, creates []func() error) (made, refused int) {
	t.Helper()
	return race(t, creates, func(err error) bool {
		var full *store.LimitError
		return errors.As(err, &full) && full.Kind == kind && full.Max == max && full.Count == int64(max)
	})
}

// Moving a shared site to another workspace adds no row, so it is never
// refused at the cap; a new origin is. Revoked, withdrawn and used rows do
// not count, and one person's rows never count against another's.
func TestOwnerCapsCountLiveRowsOfTheirOwner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, err := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		must(t, err)
		b, err := db.CreateUser(ctx, "b@example.com", "B", "hash")
		must(t, err)
		w1, err := db.CreateWorkspaceUpTo(ctx, a.ID, "one", 2)
		must(t, err)
		w2, err := db.CreateWorkspaceUpTo(ctx, a.ID, "two", 2)
		must(t, err)
		wantLimit(t, store.LimitWorkspaces, 2)(db.CreateWorkspaceUpTo(ctx, a.ID, "three", 2))
		if _, err := db.CreateWorkspaceUpTo(ctx, b.ID, "b's", 2); err != nil {
			t.Fatalf("another person at a's cap: %v", err)
		}

		if _, _, err := db.ShareSiteUpTo(ctx, a.ID, w1.ID, "https://a.example", 1); err != nil {
			t.Fatal(err)
		}
		site, prev, err := db.ShareSiteUpTo(ctx, a.ID, w2.ID, "https://a.example", 1)
		if err != nil || prev != w1.ID || site.WorkspaceID != w2.ID {
			t.Fatalf("a move at the cap: %+v %q %v", site, prev, err)
		}
		_, _, err = db.ShareSiteUpTo(ctx, a.ID, w1.ID, "https://b.example", 1)
		wantLimit(t, store.LimitSharedSites, 1)(nil, err)
		if _, _, err := db.ShareSiteUpTo(ctx, a.ID, "no-such-workspace", "https://c.example", 1); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("sharing with a missing workspace: %v", err)
		}

		tok, _, err := db.CreateAgentTokenUpTo(ctx, a.ID, w1.ID, "t", nil, 1)
		must(t, err)
		_, _, err = db.CreateAgentTokenUpTo(ctx, a.ID, w1.ID, "t2", nil, 1)
		wantLimit(t, store.LimitAgentTokens, 1)(nil, err)
		if _, _, err := db.CreateAgentTokenUpTo(ctx, a.ID, w2.ID, "t2", nil, 1); err != nil {
			t.Fatalf("another workspace at w1's cap: %v", err)
		}
		must(t, db.RevokeAgentToken(ctx, a.ID, w1.ID, tok.ID))
		if _, _, err := db.CreateAgentTokenUpTo(ctx, a.ID, w1.ID, "t3", nil, 1); err != nil {
			t.Fatalf("a token after a revoke: %v", err)
		}

		m, _, err := db.CreateMachineUpTo(ctx, a.ID, "m", 1)
		must(t, err)
		_, _, err = db.CreateMachineUpTo(ctx, a.ID, "m2", 1)
		wantLimit(t, store.LimitMachines, 1)(nil, err)
		must(t, db.RevokeMachine(ctx, a.ID, m.ID))
		if _, _, err := db.CreateMachineUpTo(ctx, a.ID, "m3", 1); err != nil {
			t.Fatalf("a machine after a revoke: %v", err)
		}

		_, plain, err := db.CreateInvitationUpTo(ctx, a.ID, "", time.Hour, 1)
		must(t, err)
		_, _, err = db.CreateInvitationUpTo(ctx, a.ID, "", time.Hour, 1)
		wantLimit(t, store.LimitInvitations, 1)(nil, err)
		if _, err := db.AcceptInvitation(ctx, plain, "c@example.com", "C", "hash"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.CreateInvitationUpTo(ctx, a.ID, "", time.Hour, 1); err != nil {
			t.Fatalf("an invitation after the last was used: %v", err)
		}
	})
}

// wantLimit checks a create's answer is the refusal at the cap of kind.
func wantLimit(t *testing.T, kind string, max int) func(any, error) {
	t.Helper()
	return func(_ any, err error) {
		t.Helper()
		var full *store.LimitError
		if !errors.As(err, &full) || full.Kind != kind || full.Max != max {
			t.Fatalf("want the %s cap of %d, got %v", kind, max, err)
		}
	}
}
