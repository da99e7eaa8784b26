package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestSharedCardSaysHowManyCallsItRuns: two identical writes share one
// card, which says that two calls wait on it and that Allow once runs each.
func TestSharedCardSaysHowManyCallsItRuns(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		ev := w.events(t)
		a, cancelA := w.buy("tea")
		defer cancelA()
		b, cancelB := w.buy("tea")
		defer cancelB()
		p := w.pending(t, 1)
		testutil.Eventually(t, testutil.WaitShort, func() bool { return server.Waiters(w.env.Server, p[0].ID) == 2 }, "the condition never held")
		if rs := w.taskRequests(t); rs[0].Waiters != 2 {
			t.Fatalf("the request says %d waiting calls, want 2", rs[0].Waiters)
		}
		for _, page := range []string{"/", "/tasks/" + w.task} {
			_, body := w.person.Do("GET", page, nil)
			for _, want := range []string{"2 identical calls wait on this request", "Allow once runs each of them", "Allow once — runs all 2 calls"} {
				if !strings.Contains(string(body), want) {
					t.Fatalf("%s does not say %q:\n%s", page, want, body)
				}
			}
		}
		// One of them gives up: the card counts one again.
		cancelB()
		<-b
		nextEvent(t, ev, "approval.updated")
		testutil.Eventually(t, testutil.WaitShort, func() bool { return w.taskRequests(t)[0].Waiters == 1 }, "the condition never held")
		_, body := w.person.Do("GET", "/", nil)
		if strings.Contains(string(body), "identical calls") || !strings.Contains(string(body), ">Allow once <kbd") {
			t.Fatalf("with one call left the card still counts several:\n%s", body)
		}
		w.answer(t, p[0].ID, "once")
		w.runInBrowser(t, "ok")
		awaitCall(t, a)
	})
}

// TestAllowedCallsOutcomeIsOnTheTask: the person who allowed a call sees
// on the task what it did: the page's result, or its error.
func TestAllowedCallsOutcomeIsOnTheTask(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		ev := w.events(t)
		ch, cancel := w.buy("tea")
		defer cancel()
		p := w.pending(t, 1)
		w.answer(t, p[0].ID, "once")
		w.runInBrowser(t, "order 42 placed")
		awaitCall(t, ch)
		nextEvent(t, ev, "call.finished")
		ch, cancel = w.buy("milk")
		defer cancel()
		p = w.pending(t, 1)
		w.answer(t, p[0].ID, "once")
		m, err := w.br.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatal(err)
		}
		w.br.Fail(m.ID, "tool_error", "out of milk")
		awaitCall(t, ch)
		nextEvent(t, ev, "call.finished")
		_, body := w.person.Do("GET", "/tasks/"+w.task, nil)
		for _, want := range []string{"What it did", "order 42 placed", "out of milk"} {
			if !strings.Contains(string(body), want) {
				t.Fatalf("the task page does not show %q:\n%s", want, body)
			}
		}
	})
}

// TestCallIsRecordedBeforeItReachesTheBrowser: when the browser receives a
// call, its audit row is already committed, as running.
func TestCallIsRecordedBeforeItReachesTheBrowser(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		ch, m := w.searchInBrowser(t)
		if a := w.auditOf(t, "search"); len(a) != 1 || a[0].Outcome != "running" {
			t.Fatalf("audit while the call is in the browser: %+v; want one running row", a)
		}
		w.br.Dispatched(m.ID, "d1")
		w.br.Result(m.ID, "found")
		awaitCall(t, ch)
		testutil.Eventually(t, testutil.WaitShort, func() bool { a := w.auditOf(t, "search"); return len(a) == 1 && a[0].Outcome == "ok" }, "the condition never held")
	})
}

// TestKilledServerLeavesItsCallsInterrupted: a server that dies with one
// call in the browser and one waiting for the person leaves both recorded;
// the next start marks them interrupted, and the audit page and the task
// show it.
func TestKilledServerLeavesItsCallsInterrupted(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		_, cancelS := callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "search", "taskId": w.task, "arguments": map[string]any{"q": "tea"}})
		defer cancelS()
		if _, err := w.br.Expect("call", testutil.WaitShort); err != nil {
			t.Fatal(err)
		}
		_, cancelB := w.buy("tea")
		defer cancelB()
		w.pending(t, 1)
		// A second server on the same database starts: the first one "died".
		// It is started as the database's one instance (SingleInstance): one
		// of several would take the first, whose heartbeat is fresh, for alive.
		second, err := server.New(server.Options{DB: w.env.DB, Key: w.env.Opts.Key, PublicURL: "http://127.0.0.1:1", SingleInstance: true})
		if err != nil {
			t.Fatal(err)
		}
		defer second.Shutdown(context.Background())
		for _, tool := range []string{"search", "buy"} {
			a := w.auditOf(t, tool)
			if len(a) != 1 || a[0].Outcome != "interrupted" || !strings.Contains(a[0].Error, "server stopped") {
				t.Fatalf("audit of the %s the killed server left: %+v", tool, a)
			}
		}
		for _, page := range []string{"/audit", "/tasks/" + w.task} {
			_, body := w.person.Do("GET", page, nil)
			if strings.Count(string(body), ">Interrupted</span>") != 2 {
				t.Fatalf("%s does not show both calls interrupted:\n%s", page, body)
			}
		}
	})
}
