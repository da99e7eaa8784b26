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

func TestMigrationsCreateEveryTable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		for _, table := range []string{"users", "invitations", "refresh_tokens", "workspaces", "agent_tokens", "tasks", "tickets", "sign_ins", "goose_db_version"} {
			if !db.Migrator().HasTable(table) {
				t.Errorf("table %s missing after migrations", table)
			}
		}
	})
}

func TestConcurrentStartsOnPostgres(t *testing.T) {
	opts := storetest.Options(t, storetest.Postgres)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := store.Open(context.Background(), opts)
			if err == nil {
				_, err = db.HasUsers(context.Background())
				db.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("instance failed to start: %v", err)
		}
	}
}

func TestOwnerIsCreatedOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var wg sync.WaitGroup
		wins := make(chan string, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				u, err := db.CreateOwner(ctx, string(rune('a'+i))+"@example.com", "Owner", "hash")
				if err == nil {
					wins <- u.ID
				} else if !errors.Is(err, store.ErrOwnerExists) {
					t.Errorf("create owner: %v", err)
				}
			}(i)
		}
		wg.Wait()
		close(wins)
		if got := len(wins); got != 1 {
			t.Fatalf("%d owners created, want exactly 1", got)
		}
	})
}

func TestRefreshRotationAndReuse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, err := db.CreateOwner(ctx, "o@example.com", "Owner", "hash")
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := db.IssueRefresh(ctx, u.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		uid, fam, second, err := db.RotateRefresh(ctx, first, time.Hour)
		if err != nil || uid != u.ID || second == first {
			t.Fatalf("rotate: uid=%q err=%v", uid, err)
		}
		if _, _, _, err := db.RotateRefresh(ctx, first, time.Hour); !errors.Is(err, store.ErrTokenReused) {
			t.Fatalf("reusing the first token: got %v, want ErrTokenReused", err)
		}
		// Reuse revoked the whole family: the legitimate successor is dead too.
		if _, _, _, err := db.RotateRefresh(ctx, second, time.Hour); !errors.Is(err, store.ErrInvalidToken) {
			t.Fatalf("successor after reuse: got %v, want ErrInvalidToken", err)
		}
		if ok, _ := db.FamilyActive(ctx, fam); ok {
			t.Fatal("family still active after reuse")
		}
	})
}

func TestExpiredRefreshIsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "o@example.com", "Owner", "hash")
		tok, _, err := db.IssueRefresh(ctx, u.ID, -time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := db.RotateRefresh(ctx, tok, time.Hour); !errors.Is(err, store.ErrInvalidToken) {
			t.Fatalf("expired token: got %v, want ErrInvalidToken", err)
		}
	})
}

// TestSweepKeepsWhatDetectsReuse: the sweep deletes expired tokens and those
// of ended sign-ins, and keeps a live sign-in's spent tokens, so presenting
// one again is still caught as reuse.
func TestSweepKeepsWhatDetectsReuse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "o@example.com", "Owner", "hash")
		spent, fam, _ := db.IssueRefresh(ctx, u.ID, time.Hour)
		if _, _, _, err := db.RotateRefresh(ctx, spent, time.Hour); err != nil {
			t.Fatal(err)
		}
		ended, endedFam, _ := db.IssueRefresh(ctx, u.ID, time.Hour)
		if err := db.RevokeFamily(ctx, endedFam); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.IssueRefresh(ctx, u.ID, -time.Second); err != nil { // expired
			t.Fatal(err)
		}
		n, err := db.SweepRefreshTokens(ctx)
		if err != nil || n != 2 {
			t.Fatalf("swept %d (%v), want the ended sign-in's token and the expired one", n, err)
		}
		if ok, _ := db.FamilyActive(ctx, fam); !ok {
			t.Fatal("the live sign-in ended with the sweep")
		}
		if _, _, _, err := db.RotateRefresh(ctx, spent, time.Hour); !errors.Is(err, store.ErrTokenReused) {
			t.Fatalf("a spent token after the sweep: got %v, want ErrTokenReused", err)
		}
		if _, _, _, err := db.RotateRefresh(ctx, ended, time.Hour); !errors.Is(err, store.ErrInvalidToken) {
			t.Fatalf("a swept token: got %v, want ErrInvalidToken", err)
		}
	})
}

func TestScopedQueriesHideOtherOwners(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		b, _ := db.CreateUser(ctx, "b@example.com", "B", "hash")
		w, _ := db.CreateWorkspace(ctx, a.ID, "A's")
		task, _ := db.CreateTask(ctx, store.NewTask{WorkspaceID: w.ID, Title: "t", CreatedBy: a.ID})
		tok, _, _ := db.CreateAgentToken(ctx, a.ID, w.ID, "laptop")
		if _, err := db.Workspace(ctx, b.ID, w.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("B reads A's workspace: %v", err)
		}
		if _, err := db.RenameWorkspace(ctx, b.ID, w.ID, "x"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("B renames A's workspace: %v", err)
		}
		if _, err := db.Task(ctx, b.ID, task.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("B reads A's task: %v", err)
		}
		if err := db.RevokeAgentToken(ctx, b.ID, w.ID, tok.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("B revokes A's token: %v", err)
		}
		if err := db.DeleteWorkspace(ctx, b.ID, w.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("B deletes A's workspace: %v", err)
		}
		if _, err := db.Workspace(ctx, a.ID, w.ID); err != nil {
			t.Errorf("A lost the workspace: %v", err)
		}
	})
}

func TestAgentTokenAuthenticates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		w, _ := db.CreateWorkspace(ctx, a.ID, "W")
		tok, plain, err := db.CreateAgentToken(ctx, a.ID, w.ID, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		if tok.TokenHash == plain {
			t.Fatal("token stored in plain")
		}
		id, err := db.AuthenticateAgent(ctx, plain)
		if err != nil || id.Workspace.ID != w.ID {
			t.Fatalf("authenticate: %v", err)
		}
		if err := db.RevokeAgentToken(ctx, a.ID, w.ID, tok.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.AuthenticateAgent(ctx, plain); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoked token still authenticates: %v", err)
		}
	})
}

// TestAgentActiveFollowsRevocationAndDeletion: a pasted token and an OAuth
// grant stand until revoked, and both fall with their workspace.
func TestAgentActiveFollowsRevocationAndDeletion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		w, _ := db.CreateWorkspace(ctx, a.ID, "W")
		tok, _, err := db.CreateAgentToken(ctx, a.ID, w.ID, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		other, _, _ := db.CreateAgentToken(ctx, a.ID, w.ID, "desktop")
		g := store.OAuthGrant{ID: store.NewID(), UserID: a.ID, WorkspaceID: w.ID, ClientID: "c", ClientName: "C", ClientHost: "c.example", CreatedAt: store.Now()}
		if err := db.Create(&g).Error; err != nil {
			t.Fatal(err)
		}
		active := func(id string) bool {
			t.Helper()
			ok, err := db.AgentActive(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !active(tok.ID) || !active(g.ID) || active("nobody") {
			t.Fatal("a standing token or grant is not active, or an unknown id is")
		}
		if ids, err := db.WorkspaceAgents(ctx, w.ID); err != nil || len(ids) != 3 {
			t.Fatalf("workspace agents: %v %v", ids, err)
		}
		if err := db.RevokeAgentToken(ctx, a.ID, w.ID, tok.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.RevokeOAuthGrant(ctx, a.ID, w.ID, g.ID); err != nil {
			t.Fatal(err)
		}
		if active(tok.ID) || active(g.ID) || !active(other.ID) {
			t.Fatal("a revoked token or grant is still active, or revoking one touched another")
		}
		if ids, _ := db.WorkspaceAgents(ctx, w.ID); len(ids) != 1 || ids[0] != other.ID {
			t.Fatalf("workspace agents after the revokes: %v", ids)
		}
		if err := db.DeleteWorkspace(ctx, a.ID, w.ID); err != nil {
			t.Fatal(err)
		}
		if active(other.ID) {
			t.Fatal("a token of a deleted workspace is still active")
		}
	})
}

func TestAuditLogIsScopedAndFiltered(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		b, _ := db.CreateUser(ctx, "b@example.com", "B", "hash")
		add := func(user, tool, outcome string) {
			if err := db.AppendAudit(ctx, &store.AuditEntry{UserID: user, WorkspaceID: "w", TokenID: "t", Site: "https://s.example", Tool: tool, Decision: "read-only", Outcome: outcome}); err != nil {
				t.Fatal(err)
			}
		}
		add(a.ID, "search", "ok")
		add(a.ID, "buy", "denied")
		add(a.ID, "search", "error")
		add(b.ID, "search", "ok")
		all, _ := db.AuditLog(ctx, a.ID, store.AuditFilter{})
		if len(all) != 3 || all[0].Outcome != "error" {
			t.Fatalf("a's log: %d entries, newest %+v", len(all), all[0])
		}
		search, _ := db.AuditLog(ctx, a.ID, store.AuditFilter{Tool: "search"})
		okOnly, _ := db.AuditLog(ctx, a.ID, store.AuditFilter{Tool: "search", Outcome: "ok"})
		older, _ := db.AuditLog(ctx, a.ID, store.AuditFilter{Before: all[0].ID})
		if len(search) != 2 || len(okOnly) != 1 || len(older) != 2 {
			t.Fatalf("filters: search=%d ok=%d older=%d", len(search), len(okOnly), len(older))
		}
	})
}

func TestSignInsListEndAndPasswordChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, err := db.CreateOwner(ctx, "o@example.com", "Owner", "hash")
		if err != nil {
			t.Fatal(err)
		}
		other, err := db.CreateUser(ctx, "p@example.com", "Other", "hash")
		if err != nil {
			t.Fatal(err)
		}
		tokA, famA, err := db.IssueRefreshFor(ctx, u.ID, "Mozilla/5.0 Chrome/131", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		_, famB, _ := db.IssueRefreshFor(ctx, u.ID, "Mozilla/5.0 Firefox/133", time.Hour)
		_, famC, _ := db.IssueRefreshFor(ctx, u.ID, "curl/8", time.Hour)
		_, famOther, _ := db.IssueRefreshFor(ctx, other.ID, "x", time.Hour)
		if _, _, _, err := db.RotateRefresh(ctx, tokA, time.Hour); err != nil {
			t.Fatal(err)
		}
		list, err := db.SignIns(ctx, u.ID)
		if err != nil || len(list) != 3 {
			t.Fatalf("sign-ins = %+v, %v; want three", list, err)
		}
		if list[0].ID != famA || list[0].UserAgent != "Mozilla/5.0 Chrome/131" || list[0].LastUsedAt.Before(list[0].CreatedAt) {
			t.Fatalf("the refreshed sign-in is not first with its browser: %+v", list[0])
		}
		// Another person's sign-in is not theirs to end; an ended one is gone from the list.
		if err := db.EndSignIn(ctx, u.ID, famOther); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ending another person's sign-in: %v, want ErrNotFound", err)
		}
		if err := db.EndSignIn(ctx, u.ID, famB); err != nil {
			t.Fatal(err)
		}
		if err := db.EndSignIn(ctx, u.ID, famB); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ending it twice: %v", err)
		}
		if ok, _ := db.FamilyActive(ctx, famB); ok {
			t.Fatal("ended sign-in still active")
		}
		// A new password ends every other sign-in, and keeps the one that set it.
		ended, err := db.SetPassword(ctx, u.ID, "new-hash", famA)
		if err != nil || len(ended) != 1 || ended[0] != famC {
			t.Fatalf("set password ended %v, %v; want [%s]", ended, err, famC)
		}
		if got, _ := db.UserByID(ctx, u.ID); got.PasswordHash != "new-hash" {
			t.Fatal("password hash not replaced")
		}
		if list, _ := db.SignIns(ctx, u.ID); len(list) != 1 || list[0].ID != famA {
			t.Fatalf("after the change: %+v, want only the current sign-in", list)
		}
		if ok, _ := db.FamilyActive(ctx, famOther); !ok {
			t.Fatal("another person's sign-in ended by a password change")
		}
		if _, err := db.SweepRefreshTokens(ctx); err != nil {
			t.Fatal(err)
		}
		if list, _ := db.SignIns(ctx, u.ID); len(list) != 1 {
			t.Fatalf("sweep changed the live list: %+v", list)
		}
	})
}

// TestRotateRefreshAcrossInstances is issue 17: two instances rotating one
// refresh token at the same moment (they cannot share the successor, which
// is stored only as a hash) both get a working successor, and the sign-in
// lives; past the grace the same token is reuse and ends it.
func TestRotateRefreshAcrossInstances(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, err := db.CreateOwner(ctx, "r@example.com", "R", "hash")
		if err != nil {
			t.Fatal(err)
		}
		first, fam, err := db.IssueRefresh(ctx, u.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		type out struct {
			next string
			err  error
		}
		res := make(chan out, n)
		for range n {
			go func() {
				_, _, next, err := db.RotateRefreshWithin(ctx, first, time.Hour, time.Now().Add(-10*time.Second))
				res <- out{next, err}
			}()
		}
		var nexts []string
		for range n {
			o := <-res
			if o.err != nil {
				t.Fatalf("concurrent rotation: %v", o.err)
			}
			nexts = append(nexts, o.next)
		}
		if live, _ := db.FamilyActive(ctx, fam); !live {
			t.Fatal("concurrent rotations of one token ended the sign-in")
		}
		for _, next := range nexts {
			if _, _, _, err := db.RotateRefreshWithin(ctx, next, time.Hour, time.Now().Add(-10*time.Second)); err != nil {
				t.Fatalf("a successor does not rotate: %v", err)
			}
		}
		if _, _, _, err := db.RotateRefreshWithin(ctx, first, time.Hour, time.Time{}); !errors.Is(err, store.ErrTokenReused) {
			t.Fatalf("the token spent, past the grace: %v, want reuse", err)
		}
		if live, _ := db.FamilyActive(ctx, fam); live {
			t.Fatal("reuse past the grace left the sign-in alive")
		}
	})
}
