package server_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestAllowRunsOnlyTheCallsTheCardCounted: Allow runs every identical call waiting on a request,
// and an agent can add one between the card's last update and the person's click. The answer
// carries the count the card showed; with more waiting now it is refused (the page shows the
// request again, the API answers 409 more_calls) and nothing runs, until an answer that counted
// them all.
func TestAllowRunsOnlyTheCallsTheCardCounted(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		a, cancelA := w.buy("tea")
		defer cancelA()
		id := w.pending(t, 1)[0].ID
		b := newBrowser(t, w.env, w.person)
		inbox := b.get("/")
		inbox.want(t, 200, `name="waiters" value="1"`)
		csrf := formCSRF.FindStringSubmatch(inbox.body)[1]
		second, cancelB := w.buy("tea") // joins the request after the card was shown
		defer cancelB()
		testutil.Eventually(t, testutil.WaitShort, func() bool { return server.Waiters(w.env.Server, id) == 2 }, "the second call never joined")

		stale := url.Values{"_csrf": {csrf}, "back": {"/"}, "answer": {"once"}, "waiters": {"1"}}
		b.post("/approvals/"+id+"/answer", stale).want(t, 409, "More identical calls joined this request after it was shown: 2 wait now", "Allow once — runs all 2 calls")
		st, body := w.person.Do("POST", "/api/approvals/"+id+"/answer", map[string]any{"answer": "always", "waiters": 1})
		if code, _ := servertest.ErrorOf(body); st != 409 || code != "more_calls" {
			t.Fatalf("a stale Always allow by the API: %d %s", st, body)
		}
		if rs := w.taskRequests(t); rs[0].Status != "pending" {
			t.Fatalf("a refused answer settled the request: %+v", rs[0])
		}
		b.post("/approvals/"+id+"/answer", url.Values{"_csrf": {csrf}, "back": {"/"}, "answer": {"once"}, "waiters": {"2"}}).want(t, 303)
		w.runInBrowser(t, "ok")
		w.runInBrowser(t, "ok")
		awaitCall(t, a)
		awaitCall(t, second)
	})
}
