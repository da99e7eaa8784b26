package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestOwnerSeesTheAuditLogsSizeAndOldestEntry: the server's owner reads the
// whole audit log's size, its oldest entry and the retention from the API
// and on the audit page; another person is refused and the page shows them
// nothing of it.
func TestOwnerSeesTheAuditLogsSizeAndOldestEntry(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true; o.AuditRetention = 30 * 24 * time.Hour })
		owner := env.Person(t, "owner@example.com")
		other := env.Person(t, "bob@example.com")
		var me struct {
			User struct{ ID string } `json:"user"`
		}
		other.MustJSON("GET", "/api/auth/me", nil, 200, &me)
		oldest := time.Now().Add(-20 * 24 * time.Hour).UTC().Truncate(time.Millisecond)
		err := env.DB.AppendAudits(context.Background(), []store.AuditEntry{
			{UserID: me.User.ID, WorkspaceID: "w", TokenID: "t", Site: "https://s.example", Tool: "a", Decision: "read-only", Outcome: "ok", CreatedAt: oldest},
			{UserID: me.User.ID, WorkspaceID: "w", TokenID: "t", Site: "https://s.example", Tool: "b", Decision: "read-only", Outcome: "ok", CreatedAt: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Bytes            int64      `json:"bytes"`
			Oldest           *time.Time `json:"oldest"`
			RetentionSeconds int64      `json:"retentionSeconds"`
		}
		owner.MustJSON("GET", "/api/audit/stats", nil, 200, &st)
		if st.Bytes <= 0 || st.Oldest == nil || !st.Oldest.Equal(oldest) || st.RetentionSeconds != 30*24*3600 {
			t.Errorf("stats %+v; want a size, oldest %s, retention 30 days", st, oldest)
		}
		if code, body := other.Do("GET", "/api/audit/stats", nil); code != 403 || !strings.Contains(string(body), "owner_only") {
			t.Errorf("another person got %d %s; want 403 owner_only", code, body)
		}
		code, page := owner.Do("GET", "/audit", nil)
		if code != 200 || !strings.Contains(string(page), `id="audit-size"`) || !strings.Contains(string(page), `id="audit-oldest"`) ||
			!strings.Contains(string(page), oldest.Format("2006-01-02")) || !strings.Contains(string(page), "30 days") {
			t.Errorf("the owner's audit page (%d) does not show the size, oldest entry and retention:\n%s", code, page)
		}
		if _, page := other.Do("GET", "/audit", nil); strings.Contains(string(page), `id="audit-stats"`) {
			t.Error("another person's audit page shows the whole log's size")
		}
	})
}
