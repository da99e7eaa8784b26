package server_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestARepeatedDeniedCallIsNotAskedAgain: an agent that repeats a call the
// person denied, in the same task, is told no at once without the person
// being asked again (the approval model's remembered denial), the audit log
// says why, and the person can let it be asked again from the task's page.
func TestARepeatedDeniedCallIsNotAskedAgain(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())

		ch, cancel := w.buy("tea")
		denied := w.pending(t, 1)[0]
		w.answer(t, denied.ID, "deny")
		wantError(t, awaitCall(t, ch), "denied", "Do not repeat")
		cancel()

		// The same call again, and again: refused at once, nothing asked.
		for range 2 {
			ch, cancel = w.buy("tea")
			wantError(t, awaitCall(t, ch), "already denied this same call of buy", "not asked again", "Do not repeat it")
			cancel()
			w.pending(t, 0)
		}
		// Other arguments are another question.
		ch, cancel = w.buy("coffee")
		other := w.pending(t, 1)[0]
		w.answer(t, other.ID, "deny")
		awaitCall(t, ch)
		cancel()

		var audit struct {
			Entries []struct{ Tool, Decision, DecidedBy, Outcome, RequestID string } `json:"entries"`
		}
		w.person.MustJSON("GET", "/api/audit", nil, 200, &audit)
		var got []string
		for _, e := range audit.Entries {
			got = append(got, e.Decision+":"+e.Outcome)
		}
		if want := "asked:denied remembered:denied remembered:denied asked:denied"; strings.Join(got, " ") != want {
			t.Fatalf("audit:\n got %s\nwant %s", strings.Join(got, " "), want)
		}
		if e := audit.Entries[1]; e.RequestID != denied.ID || e.DecidedBy == "" {
			t.Fatalf("a remembered denial's row names request %q decided by %q, want %s and the person", e.RequestID, e.DecidedBy, denied.ID)
		}

		// The task page says so, and offers to ask again.
		b := newBrowser(t, w.env, w.person)
		b.get("/tasks/"+w.task).want(t, 200, `id="req-`+denied.ID+`-forget"`, "it is refused without asking you",
			"Denied before by you — not asked again")
		b.post("/approvals/"+denied.ID+"/forget", url.Values{"back": {"/tasks/" + w.task}}).redirect(t, "/tasks/"+w.task)
		p := b.get("/tasks/" + w.task)
		p.want(t, 200, `id="req-`+denied.ID+`-forgotten"`)
		if strings.Contains(p.body, `id="req-`+denied.ID+`-forget"`) {
			t.Fatal("the task page still offers to ask again a denial already let go")
		}
		b.post("/approvals/"+denied.ID+"/forget", url.Values{"back": {"/tasks/" + w.task}}).want(t, 409, "not a denial being remembered")
		status, body := w.person.Do("POST", "/api/approvals/"+other.ID+"/forget", nil)
		if status != 200 || !strings.Contains(string(body), `"forgottenAt"`) {
			t.Fatalf("forget through the API: %d %s", status, body)
		}
		status, body = w.person.Do("POST", "/api/approvals/"+other.ID+"/forget", nil)
		if status != 409 || !strings.Contains(string(body), "not_remembered") {
			t.Fatalf("forget twice through the API: %d %s", status, body)
		}

		// Let go, the same call asks again.
		ch, cancel = w.buy("tea")
		again := w.pending(t, 1)[0]
		if again.ID == denied.ID {
			t.Fatal("the denied request is pending again")
		}
		w.answer(t, again.ID, "once")
		w.runInBrowser(t, "bought")
		if res := awaitCall(t, ch); res.IsError {
			t.Fatal(servertest.ResultText(res))
		}
		cancel()
	})
}

// TestOnlyThePersonLetsADenialGo: an agent's token cannot undo the person's
// no, nor can another person.
func TestOnlyThePersonLetsADenialGo(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true }, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	denied := w.pending(t, 1)[0]
	w.answer(t, denied.ID, "deny")
	awaitCall(t, ch)

	agent := w.env.Agent(t, w.token)
	agent.CSRF = w.person.CSRF
	if status, body := agent.Do("POST", "/api/approvals/"+denied.ID+"/forget", nil); status != 401 && status != 403 {
		t.Fatalf("an agent token let the denial go: %d %s", status, body)
	}
	bob := w.env.Person(t, "bob@example.com")
	if status, body := bob.Do("POST", "/api/approvals/"+denied.ID+"/forget", nil); status != 404 {
		t.Fatalf("another person let the denial go: %d %s", status, body)
	}
	ch2, cancel2 := w.buy("tea")
	defer cancel2()
	wantError(t, awaitCall(t, ch2), "already denied")
}

// TestApprovalInputsThatAreNotWhatTheySaySayWhy: a count of waiting calls
// that is not a number, and a task filter naming no task of the person's,
// are refused with what is wrong, not read as 1 or as an empty list.
func TestApprovalInputsThatAreNotWhatTheySaySayWhy(t *testing.T) {
	w := newSiteWorld(t, storetest.SQLite, nil, nil)
	w.announce(t, "d1", time.Now())
	ch, cancel := w.buy("tea")
	defer cancel()
	p := w.pending(t, 1)[0]
	b := newBrowser(t, w.env, w.person)
	for _, n := range []string{"abc", "-2", "1.5", " 1"} {
		b.post("/approvals/"+p.ID+"/answer", url.Values{"answer": {"once"}, "waiters": {n}}).want(t, 400, "waiters", "nothing was answered")
	}
	if got := w.pending(t, 1)[0]; got.ID != p.ID {
		t.Fatalf("a refused answer changed the request: %+v", got)
	}
	status, body := w.person.Do("GET", "/api/approvals?task=no-such-task", nil)
	if status != 404 || !strings.Contains(string(body), "not_found") {
		t.Fatalf("pending of a task that does not exist: %d %s", status, body)
	}
	var out struct {
		Approvals []pendingView `json:"approvals"`
	}
	w.person.MustJSON("GET", "/api/approvals?task="+w.task, nil, 200, &out)
	if len(out.Approvals) != 1 || out.Approvals[0].ID != p.ID {
		t.Fatalf("pending of the task: %+v", out.Approvals)
	}
	// 0 is what the card of a request whose agent went away sends: it answers.
	b.post("/approvals/"+p.ID+"/answer", url.Values{"answer": {"deny"}, "waiters": {"0"}}).redirect(t, "/")
	awaitCall(t, ch)
}
