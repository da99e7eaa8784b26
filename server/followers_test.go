package server

import (
	"context"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestFollowingAnEndedSignInEndsAtOnce: a socket that starts following a
// sign-in after the sign-out already swept what it opened (its ticket was
// redeemed just before) is ended at once; one of a live sign-in is not.
func TestFollowingAnEndedSignInEndsAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, err := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		if err != nil {
			t.Fatal(err)
		}
		_, family, err := db.IssueRefresh(ctx, u.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s := newFollowers(db.FamilyActive)
		early, stopEarly := s.follow(ctx, family)
		defer stopEarly()
		if early.Err() != nil {
			t.Fatal("following a live sign-in ended it")
		}
		if err := db.RevokeFamily(ctx, family); err != nil { // sign-out: revoke, then end
			t.Fatal(err)
		}
		s.end(family)
		if early.Err() == nil {
			t.Fatal("the sign-out did not end what followed its sign-in")
		}
		late, stopLate := s.follow(ctx, family)
		defer stopLate()
		if late.Err() == nil {
			t.Fatal("a socket that began following an ended sign-in is still open")
		}
		if n := len(s.byKey); n != 1 {
			t.Fatalf("%d sign-ins followed", n)
		}
	})
}
