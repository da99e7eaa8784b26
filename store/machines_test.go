package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestMachineBelongsToItsFirstInstall: the first install to link claims
// the machine and may link again; another install is refused and the
// attempt recorded; two first links racing cannot both win.
func TestMachineBelongsToItsFirstInstall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, err := db.CreateUser(ctx, "a@example.com", "A", "hash")
		if err != nil {
			t.Fatal(err)
		}
		m, token, err := db.CreateMachine(ctx, u.ID, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		auth := func() *store.Machine {
			t.Helper()
			got, err := db.AuthenticateMachine(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if err := db.ClaimMachine(ctx, auth(), "install-aaaaaaaaaaaaaaaa"); err != nil {
			t.Fatalf("first claim: %v", err)
		}
		if err := db.ClaimMachine(ctx, auth(), "install-aaaaaaaaaaaaaaaa"); err != nil {
			t.Fatalf("the same install again: %v", err)
		}
		other := auth()
		if err := db.ClaimMachine(ctx, other, "install-bbbbbbbbbbbbbbbb"); !errors.Is(err, store.ErrOtherInstall) || other.OtherInstallAt == nil {
			t.Fatalf("another install: %v (at %v)", err, other.OtherInstallAt)
		}
		saved, err := db.Machine(ctx, u.ID, m.ID)
		if err != nil || saved.OtherInstallAt == nil || saved.LastSeenAt == nil {
			t.Fatalf("the refusal was not recorded: %+v %v", saved, err)
		}

		// Two installs racing for a fresh machine: exactly one wins.
		_, token2, _ := db.CreateMachine(ctx, u.ID, "desk")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m2, err := db.AuthenticateMachine(ctx, token2)
				if err == nil {
					err = db.ClaimMachine(ctx, m2, "racing-install-"+string(rune('a'+i))+"xxxxxxxx")
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		if won := (errs[0] == nil) != (errs[1] == nil); !won || (!errors.Is(errs[0], store.ErrOtherInstall) && !errors.Is(errs[1], store.ErrOtherInstall)) {
			t.Fatalf("racing claims: %v, %v; want one win and one ErrOtherInstall", errs[0], errs[1])
		}

		if err := db.RevokeMachine(ctx, u.ID, m.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.ClaimMachine(ctx, other, "install-aaaaaaaaaaaaaaaa"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("claiming a revoked machine: %v", err)
		}
	})
}
