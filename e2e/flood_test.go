package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// TestFloodOfUnansweredCallsKeepsTheBrowser is issue 11 items 4 and 5 end to end: an agent floods
// the person's real Chrome with calls the page never answers in time. The browser runs at most
// its in-flight cap of them (the rest are refused as busy, at once); those that went out all time
// out together, and their call.cancel messages — more than the socket's queue of replies holds —
// reach the page (every call is aborted in the page) without the browser being closed as a slow
// consumer. Then a call succeeds on the same socket: no reconnect, no new welcome.
func TestFloodOfUnansweredCallsKeepsTheBrowser(t *testing.T) {
	const maxCalls, flood = 200, 210
	w := newWorld(t, func(o *server.Options) {
		o.CallTimeout = 8 * time.Second // room for the whole flood to arrive before the first times out
		o.Bridge.QueueSize = 8          // replies and pushes; far fewer than the cancels to come
		o.Bridge.MaxCalls = maxCalls
	})
	index := w.site + "/"
	tab := w.b.Tab(t, index)
	waitDocument(t, w.b, w.worker, index, "search", "slow")
	w.person.MustJSON("POST", "/api/sites", map[string]string{"origin": w.site, "workspaceId": w.ws}, 201, nil)
	w.b.eval(t, w.worker, `__tabbridgeTest.ready().then(() => { __tabbridgeTest.link.kick(); return true; })`, nil)
	w.waitOnline(w.agent, "search", "slow")
	w.allowAlways("slow", map[string]any{"seconds": 0}) // the flood needs no answers from the person
	before := w.link()
	if before.State != "open" {
		t.Fatalf("the link is %+v before the flood", before)
	}

	var calls []<-chan asyncCall
	for i := 0; i < maxCalls; i++ {
		ch, cancel := w.callAsync(w.agent, "slow", map[string]any{"seconds": 120}, true)
		defer cancel()
		calls = append(calls, ch)
	}
	var me struct{ User struct{ ID string } }
	w.person.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	uid := me.User.ID
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		return w.live.env.Server.Hub().CallsInFlight(uid) == maxCalls
	}, "every call of the flood is in the browser")
	for i := maxCalls; i < flood; i++ {
		ch, cancel := w.callAsync(w.agent, "slow", map[string]any{"seconds": 120}, true)
		defer cancel()
		wantErrorResult(t, w.await(ch), "already running 200 tool calls, the most one browser runs at once")
	}
	for _, ch := range calls {
		if res := w.await(ch); !strings.Contains(servertest.ResultText(res), "did not finish within 8s") {
			t.Fatalf("a call of the flood answered %q", servertest.ResultText(res))
		}
	}
	// Every call that reached the page was aborted there.
	var aborted int
	w.b.waitJS(t, tab, 15*time.Second, `window.testsite.log.filter(l => l.startsWith('slow aborted')).length === 200 && 200`, &aborted)

	// The same socket: never closed, no new welcome; and the next call runs on it.
	r := w.search(w.agent, "after the flood")
	if r.Q != "after the flood" {
		t.Fatalf("search after the flood = %+v", r)
	}
	after := w.link()
	if after.State != "open" || after.Stats.Connects != before.Stats.Connects || after.Stats.Welcomes != before.Stats.Welcomes {
		t.Fatalf("the link was reconnected by the flood: before %+v, after %+v", before.Stats, after.Stats)
	}
}
