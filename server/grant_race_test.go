package server_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestAnAlwaysAllowThatLandsAfterAnUnshareGrantsNothing: the person answers "Always allow" and,
// in the moment between the answer settling the request and the grant being made, stops sharing
// the site (from another tab, or another person's screen of theirs). The unshare revokes the
// workspace's grants; the grant made just after it must not exist, or sharing the site again would
// let the tool run without asking. The unshare is run exactly there by a hook on the grant's
// statement.
func TestAnAlwaysAllowThatLandsAfterAnUnshareGrantsNothing(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		var armed atomic.Bool
		var w *siteWorld
		unshare := func(tx *gorm.DB) {
			if !strings.Contains(tx.Statement.Table+tx.Statement.SQL.String(), "grants") || !armed.CompareAndSwap(true, false) {
				return
			}
			var sites struct {
				Sites []struct{ ID, Origin string } `json:"sites"`
			}
			w.person.MustJSON("GET", "/api/sites", nil, 200, &sites)
			w.person.MustJSON("DELETE", "/api/sites/"+sites.Sites[0].ID, nil, 204, nil)
		}
		w = newSiteWorld(t, k, func(o *server.Options) {
			// On the test's own database before the server uses it; acts once, when armed.
			if err := o.DB.Callback().Create().Before("gorm:create").Register("test:unshare", unshare); err != nil {
				t.Fatal(err)
			}
			if err := o.DB.Callback().Raw().Before("gorm:raw").Register("test:unshare", unshare); err != nil {
				t.Fatal(err)
			}
		}, nil)
		w.announce(t, "d1", time.Now())
		ch, cancel := w.buy("tea")
		defer cancel()
		p := w.pending(t, 1)
		armed.Store(true)
		w.answer(t, p[0].ID, "always")
		cancel() // the allowed call itself may have gone to the browser before the unshare: not this test's
		<-ch
		if armed.Load() {
			t.Fatal("the hook never ran: the grant was made by a statement the test does not know")
		}

		var grants struct {
			Grants []struct{ ID, Tool, Site string } `json:"grants"`
		}
		w.person.MustJSON("GET", "/api/grants", nil, 200, &grants)
		if len(grants.Grants) != 0 {
			t.Errorf("after the unshare the person has grants %+v, want none", grants.Grants)
		}
		// Shared again, the tool asks first.
		w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": shop, "workspaceId": w.ws}, 201, nil)
		w.announce(t, "d1", time.Now())
		ch, cancel = w.buy("tea")
		defer cancel()
		p = w.pending(t, 1)
		w.answer(t, p[0].ID, "deny")
		if res := awaitCall(t, ch); !res.IsError || !strings.Contains(servertest.ResultText(res), "denied") {
			t.Fatalf("the call after sharing again: %s", servertest.ResultText(res))
		}
	})
}
