package server_test

import (
	"context"
	"testing"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestABrowserIDIsOnlyItsPersons: a browser's id is the extension's say-so,
// so two people may present the same one (a copied profile, or one who
// learnt the other's). The instance registry records which instance holds
// each person's browsers (a peer's directory and a dead instance's clean-up
// read it); one person's browser must neither take over the other's record
// nor, leaving, erase it.
func TestABrowserIDIsOnlyItsPersons(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice := env.Person(t, "alice@example.com")
		bob := env.Person(t, "bob@example.com")
		aliceID, bobID := userIDOf(t, alice), userIDOf(t, bob)
		const same = "the-same-browser-id"
		links := func(uid string) []cluster.Link {
			l, err := env.Server.Registry().Links(context.Background(), cluster.LinkBrowser, uid)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		held := func(uid string) bool {
			for _, l := range links(uid) {
				if l.LinkID == same && l.UserID == uid {
					return true
				}
			}
			return false
		}
		extBrowser(t, env, alice, same)
		testutil.Eventually(t, testutil.WaitShort, func() bool { return held(aliceID) }, "alice's browser was never recorded")
		br, _ := extBrowser(t, env, bob, same)
		testutil.Eventually(t, testutil.WaitShort, func() bool { return held(bobID) }, "bob's browser was never recorded")
		if !held(aliceID) {
			t.Fatalf("bob's browser of the same id took over alice's record: alice %+v, bob %+v", links(aliceID), links(bobID))
		}
		br.Close()
		testutil.Eventually(t, testutil.WaitShort, func() bool { return !held(bobID) }, "bob's browser left but stays recorded")
		if !held(aliceID) {
			t.Fatalf("bob's browser leaving erased alice's record: %+v", links(aliceID))
		}
	})
}
