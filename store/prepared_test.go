package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// The account and OAuth flows' transactions must run past gorm's
// prepared-statement cache. Through it, a transaction on SQLite's one
// connection can meet a statement another goroutine has cached but is still
// preparing on the pool: the transaction waits for the statement, the
// preparation for the transaction's connection. A statement waited for in
// the cache also holds the cache's read lock, so the transaction need not run
// that very statement: preparing any new one of its own waits too.
//
// Each round opens a fresh handle on one database, so that no statement is
// prepared yet, and runs one kind of transaction in txsPerRound goroutines
// beside readsPerRound goroutines of ordinary reads, all released at once.
const (
	txRounds      = 3
	txsPerRound   = 8
	readsPerRound = 16
)

// txKind is one transaction of the store: arrange sets up n of them on setup
// (which stays open) and returns the i'th, to run on a fresh handle.
type txKind struct {
	name    string
	arrange func(t *testing.T, f txFixture, n int) func(ctx context.Context, db *store.DB, i int) error
}

// txFixture is what every kind's arrangement starts from.
type txFixture struct {
	setup *store.DB
	owner *store.User
	w     *store.Workspace
}

// user creates an account of its own for one arrangement, so no kind's
// transactions touch another's rows.
func (f txFixture) user(t *testing.T) *store.User {
	t.Helper()
	u, err := f.setup.CreateUser(context.Background(), store.NewID()+"@example.com", "U", "hash")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// grants exchanges n fresh codes of owner's workspace, returning the grants
// and the hash of each one's refresh token.
func (f txFixture) grants(t *testing.T, n int) ([]*store.OAuthGrant, []string) {
	t.Helper()
	ctx := context.Background()
	now := store.Now()
	var gs []*store.OAuthGrant
	var refresh []string
	for range n {
		hash := store.NewID()
		f.code(t, hash, now)
		toks := freshTokens(now)
		g, err := f.setup.ExchangeOAuthCode(ctx, hash, now, acceptCode, toks)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
		refresh = append(refresh, toks.RefreshHash)
	}
	return gs, refresh
}

func (f txFixture) code(t *testing.T, hash string, now time.Time) {
	t.Helper()
	err := f.setup.CreateOAuthCode(context.Background(), &store.OAuthCode{CodeHash: hash, ClientID: "c", ClientName: "C",
		ClientHost: "h", UserID: f.owner.ID, WorkspaceID: f.w.ID, RedirectURI: "http://127.0.0.1/cb", CodeChallenge: "x",
		Scope: "mcp", Resource: "r", ExpiresAt: now.Add(time.Hour), CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
}

func acceptCode(*store.OAuthCode) error { return nil }

func freshTokens(now time.Time) store.NewTokens {
	return store.NewTokens{AccessHash: store.NewID(), RefreshHash: store.NewID(),
		AccessExpires: now.Add(time.Hour), RefreshExpires: now.Add(time.Hour)}
}

// txKinds are every transaction of the account and OAuth flows.
var txKinds = []txKind{
	{"CreateOwner", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		return func(ctx context.Context, db *store.DB, i int) error {
			_, err := db.CreateOwner(ctx, store.NewID()+"@example.com", "O", "hash")
			if errors.Is(err, store.ErrOwnerExists) {
				return nil // the fixture's owner exists: the transaction counted and refused
			}
			return err
		}
	}},
	{"AcceptInvitation", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		var tokens []string
		for range n {
			_, tok, err := f.setup.CreateInvitation(context.Background(), f.owner.ID, "", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, tok)
		}
		return func(ctx context.Context, db *store.DB, i int) error {
			_, err := db.AcceptInvitation(ctx, tokens[i], store.NewID()+"@example.com", "I", "hash")
			return err
		}
	}},
	{"IssueRefreshFor", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		u := f.user(t)
		return func(ctx context.Context, db *store.DB, i int) error {
			_, _, err := db.IssueRefreshFor(ctx, u.ID, "agent", time.Hour)
			return err
		}
	}},
	{"RotateRefresh", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		u := f.user(t)
		var tokens []string
		for range n {
			tok, _, err := f.setup.IssueRefresh(context.Background(), u.ID, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, tok)
		}
		return func(ctx context.Context, db *store.DB, i int) error {
			_, _, _, err := db.RotateRefresh(ctx, tokens[i], time.Hour)
			return err
		}
	}},
	{"SetPassword", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		u := f.user(t)
		return func(ctx context.Context, db *store.DB, i int) error {
			_, err := db.SetPassword(ctx, u.ID, fmt.Sprintf("hash%d", i), "")
			return err
		}
	}},
	{"ExchangeOAuthCode", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		now := store.Now()
		var hashes []string
		for range n {
			hashes = append(hashes, store.NewID())
			f.code(t, hashes[len(hashes)-1], now)
		}
		return func(ctx context.Context, db *store.DB, i int) error {
			_, err := db.ExchangeOAuthCode(ctx, hashes[i], now, acceptCode, freshTokens(now))
			return err
		}
	}},
	{"RotateOAuthRefresh", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		_, refresh := f.grants(t, n)
		return func(ctx context.Context, db *store.DB, i int) error {
			now := store.Now()
			_, err := db.RotateOAuthRefresh(ctx, refresh[i], "c", now, freshTokens(now))
			return err
		}
	}},
	{"RevokeOAuthGrant", func(t *testing.T, f txFixture, n int) func(context.Context, *store.DB, int) error {
		gs, _ := f.grants(t, n)
		return func(ctx context.Context, db *store.DB, i int) error {
			return db.RevokeOAuthGrant(ctx, f.owner.ID, f.w.ID, gs[i].ID)
		}
	}},
}

// ordinaryReads are reads through the cache that the same flows make, each
// run by several goroutines at once, so some wait in the cache for another's
// preparation.
func ordinaryReads(f txFixture) []func(ctx context.Context, db *store.DB) error {
	return []func(context.Context, *store.DB) error{
		func(ctx context.Context, db *store.DB) error {
			_, err := db.UserByID(ctx, f.owner.ID)
			return err
		},
		func(ctx context.Context, db *store.DB) error {
			_, err := db.UserByEmail(ctx, f.owner.Email)
			return err
		},
		func(ctx context.Context, db *store.DB) error {
			_, err := db.HasUsers(ctx)
			return err
		},
		func(ctx context.Context, db *store.DB) error {
			_, err := db.SignIns(ctx, f.owner.ID)
			return err
		},
		func(ctx context.Context, db *store.DB) error {
			_, err := db.Workspaces(ctx, f.owner.ID)
			return err
		},
		func(ctx context.Context, db *store.DB) error {
			_, err := db.OAuthGrants(ctx, f.owner.ID, f.w.ID)
			return err
		},
	}
}

func TestTransactionsMeetStatementsBeingPrepared(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		ctx := context.Background()
		setup, opts := storetest.Shared(t, k)
		owner, err := setup.CreateOwner(ctx, "owner@example.com", "O", "hash")
		if err != nil {
			t.Fatal(err)
		}
		w, err := setup.CreateWorkspace(ctx, owner.ID, "W")
		if err != nil {
			t.Fatal(err)
		}
		f := txFixture{setup: setup, owner: owner, w: w}
		for _, kind := range txKinds {
			t.Run(kind.name, func(t *testing.T) {
				for round := range txRounds {
					run := kind.arrange(t, f, txsPerRound)
					db, err := store.Open(ctx, opts)
					if err != nil {
						t.Fatal(err)
					}
					if !raceColdHandle(t, db, run, ordinaryReads(f)) {
						t.Fatalf("round %d of %d: %s did not finish within %s beside reads of a fresh handle: deadlocked on a statement being prepared", round+1, txRounds, kind.name, testutil.WaitShort)
					}
					db.Close()
				}
			})
		}
	})
}

// raceColdHandle runs txsPerRound transactions (run) and readsPerRound
// reads on db at once, bounded by WaitShort, and reports whether they all
// finished; their errors fail the test. A round that deadlocks is freed by
// its context's end (the preparation waiting for the connection gives up),
// and db is then left open, in case it is not.
func raceColdHandle(t *testing.T, db *store.DB, run func(context.Context, *store.DB, int) error, reads []func(context.Context, *store.DB) error) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
	defer cancel()
	var work []func() error
	for i := range txsPerRound {
		work = append(work, func() error { return run(ctx, db, i) })
	}
	for i := range readsPerRound {
		work = append(work, func() error { return reads[i%len(reads)](ctx, db) })
	}
	start := make(chan struct{})
	errs := make(chan error, len(work))
	var wg sync.WaitGroup
	for _, do := range work {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := do(); err != nil {
				errs <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	close(start)
	select {
	case <-done:
	case <-ctx.Done():
		select {
		case <-done:
		case <-time.After(testutil.WaitShort):
		}
		return false
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return true
}
