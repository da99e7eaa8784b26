package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

func oauthCode(t *testing.T, db *store.DB, hash string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	u, err := db.CreateUser(ctx, hash+"@example.com", "A", "hash")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := db.CreateWorkspace(ctx, u.ID, "W")
	err = db.CreateOAuthCode(ctx, &store.OAuthCode{CodeHash: hash, ClientID: "c", ClientName: "C", ClientHost: "h", UserID: u.ID,
		WorkspaceID: w.ID, RedirectURI: "http://127.0.0.1/cb", CodeChallenge: "x", Scope: "mcp", Resource: "r",
		ExpiresAt: now.Add(time.Minute), CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
}

func newTokens(i int, now time.Time) store.NewTokens {
	return store.NewTokens{AccessHash: "a" + string(rune('a'+i)), RefreshHash: "r" + string(rune('a'+i)),
		AccessExpires: now.Add(time.Minute), RefreshExpires: now.Add(time.Hour)}
}

// TestOAuthCodeIsRedeemedOnce: of concurrent exchanges of one code exactly
// one wins; the others see a reuse, which revokes the winner's grant.
func TestOAuthCodeIsRedeemedOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := store.Now()
		oauthCode(t, db, "code1", now)
		ok := func(*store.OAuthCode) error { return nil }
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, reused := 0, 0
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.ExchangeOAuthCode(context.Background(), "code1", now, ok, newTokens(i, now))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, store.ErrReused):
					reused++
				default:
					t.Errorf("exchange: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || reused != 9 {
			t.Fatalf("%d wins, %d reuses", wins, reused)
		}
	})
}

// TestOAuthRefreshRotationAndReuse: a refresh token rotates once; showing
// the spent one again revokes the grant and every token in it.
func TestOAuthRefreshRotationAndReuse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := store.Now()
		oauthCode(t, db, "code2", now)
		g, err := db.ExchangeOAuthCode(ctx, "code2", now, func(*store.OAuthCode) error { return nil }, newTokens(0, now))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.RotateOAuthRefresh(ctx, "ra", "other-client", now, newTokens(1, now)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another client's rotation: %v", err)
		}
		if _, err := db.RotateOAuthRefresh(ctx, "ra", "c", now, newTokens(1, now)); err != nil {
			t.Fatalf("rotate: %v", err)
		}
		if a, err := db.AuthenticateOAuth(ctx, "ab", now); err != nil || a.Agent.TokenID != g.ID || !a.Agent.Grant {
			t.Fatalf("new access token: %+v %v", a, err)
		}
		if _, err := db.RotateOAuthRefresh(ctx, "ra", "c", now, newTokens(2, now)); !errors.Is(err, store.ErrReused) {
			t.Fatalf("reuse: %v", err)
		}
		if _, err := db.AuthenticateOAuth(ctx, "ab", now); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("access token after reuse: %v", err)
		}
		if _, err := db.RotateOAuthRefresh(ctx, "rb", "c", now, newTokens(3, now)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("newest refresh token after reuse: %v", err)
		}
		// Expired access tokens are refused and swept.
		if _, err := db.AuthenticateOAuth(ctx, "aa", now.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired access token: %v", err)
		}
	})
}

// TestOAuthSweep deletes expired tokens and day-old registrations no live
// grant uses, and keeps the rest.
func TestOAuthSweep(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		now := store.Now()
		old := now.Add(-48 * time.Hour)
		for _, id := range []string{"c", "unused", "fresh"} {
			at := old
			if id == "fresh" {
				at = now
			}
			if err := db.CreateOAuthClient(ctx, &store.OAuthClient{ID: id, Name: id, RedirectURIs: "http://127.0.0.1/cb", CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		oauthCode(t, db, "code3", now)
		toks := newTokens(0, now)
		toks.AccessExpires = now.Add(-time.Second)
		if _, err := db.ExchangeOAuthCode(ctx, "code3", now, func(*store.OAuthCode) error { return nil }, toks); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SweepOAuth(ctx); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]bool{"c": true, "unused": false, "fresh": true} {
			_, err := db.OAuthClientByID(ctx, id)
			if (err == nil) != want {
				t.Errorf("client %s kept %v, want %v", id, err == nil, want)
			}
		}
		if _, err := db.RotateOAuthRefresh(ctx, "ra", "c", now, newTokens(1, now)); err != nil {
			t.Errorf("the live refresh token was swept: %v", err)
		}
	})
}
