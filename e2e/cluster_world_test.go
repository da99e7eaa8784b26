package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/daemon/daemontest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// clusterWorld is the world (a browser with the real extension, the person,
// an agent) on a cluster: every one of them reaches the server through
// haproxy only.
type clusterWorld struct {
	*world
	c *cluster
}

func newClusterWorld(t *testing.T) *clusterWorld {
	c := startCluster(t, 3)
	w := newWorldOn(t, &liveServer{t: t, addr: c.proxyAddr, env: c.env()})
	return &clusterWorld{world: w, c: c}
}

// browserHolder waits until an instance other than not holds the world's
// browser socket, and returns it.
func (cw *clusterWorld) browserHolder(not ...string) *instance {
	cw.t.Helper()
	var id string
	testutil.Eventually(cw.t, testutil.WaitLong, func() bool {
		err := cw.c.db.QueryRow(`SELECT instance_id FROM instance_links WHERE kind = 'browser' ORDER BY since DESC LIMIT 1`).Scan(&id)
		if err != nil {
			return false
		}
		for _, n := range not {
			if id == n {
				return false
			}
		}
		return true
	}, fmt.Sprintf("an instance (not %v) holds the browser", not))
	return cw.c.byID(id)
}

// pinBrowser makes haproxy send the browser's requests (pages, fetches,
// sockets: the cookie jar is the profile's) to in; nil unpins.
func (cw *clusterWorld) pinBrowser(tab context.Context, in *instance) {
	cw.t.Helper()
	err := chromedp.Do(tab, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var err error
		if in == nil {
			_, err = cdp.Call(ctx, t, network.DeleteCookies, network.DeleteCookiesParams{Name: pinCookie, URL: cw.c.URL})
		} else {
			_, err = cdp.Call(ctx, t, network.SetCookie, network.SetCookieParams{Name: pinCookie, Value: in.id, URL: cw.c.URL, Path: "/"})
		}
		return err
	}))
	if err != nil {
		cw.t.Fatalf("pin the browser: %v", err)
	}
}

// call calls a tool as agent and returns the outcome, whatever it is.
func callOutcomeOf(agent *mcp.ClientSession, site, task, tool string, args map[string]any, timeout time.Duration) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	params := map[string]any{"site": site, "tool": tool, "arguments": args}
	if task != "" {
		params["taskId"] = task
	}
	return agent.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool", Arguments: params})
}

// mainScreen is waitScreen for a page of the extension's browser, where
// the extension's content scripts add an isolated world that chromedp's
// Poll may evaluate in (window.__term is the page's own): it evaluates in
// the page's main world.
func mainScreen(t *testing.T, page context.Context, what, text string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() bool {
		s, err := chromedp.Run(page, chromedp.Evaluate[string](`window.__term ? `+screenJS+` : ''`))
		return err == nil && strings.Contains(s, text)
	}, fmt.Sprintf("%s: the terminal shows %q", what, text))
}

// termState waits until the terminal page is in state (data-state).
func termState(t *testing.T, page context.Context, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(page, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#term-page[data-state="`+state+`"]`))); err != nil {
		got, _ := chromedp.Run(page, chromedp.Evaluate[string](`document.getElementById('term-page').dataset.state + ': ' + document.getElementById('term-state').textContent`))
		t.Fatalf("the terminal page never showed %q (%v); it shows %q", state, err, got)
	}
}

// TestCluster runs issue 17's scenarios on three instances of the real
// server behind haproxy, with the real extension in Chromium, a real daemon
// and real MCP clients, in order on one browser: a call whose agent,
// browser and approving person each reached a different instance; live
// events on every instance; a viewer on one instance typing into a daemon
// on another, which survives the daemon's instance being killed; an
// instance killed mid-traffic; a rolling restart of all three while an
// agent calls in a loop.
func TestCluster(t *testing.T) {
	cw := newClusterWorld(t)
	w, c := cw.world, cw.c
	index := w.site + "/"
	tab := w.b.Tab(t, index)
	d := waitDocument(t, w.b, w.worker, index, "search", "slow", "addItem")
	w.shareFromPopup(d.TabID, "search", "slow", "addItem")

	t.Run("agent, browser and approving person each on a different instance", func(t *testing.T) {
		w.enter(t)
		holder := cw.browserHolder()
		agentAt := c.other(holder)
		personAt := c.other(holder, agentAt)
		agent := c.agent(t, w.token, agentAt)
		person := c.pinned(w.person, personAt)
		got := make(chan asyncCall, 1)
		go func() {
			res, err := callOutcomeOf(agent, w.site, w.task, "addItem", map[string]any{"text": "tea"}, 60*time.Second)
			got <- asyncCall{res, err}
		}()
		var out struct {
			Approvals []pendingRequest `json:"approvals"`
		}
		testutil.Eventually(t, testutil.WaitMedium, func() bool {
			person.MustJSON("GET", "/api/approvals", nil, 200, &out)
			return len(out.Approvals) == 1
		}, "the person sees the request on their instance")
		person.MustJSON("POST", "/api/approvals/"+out.Approvals[0].ID+"/answer", map[string]string{"answer": "once"}, 200, nil)
		o := <-got
		if o.err != nil || o.res.IsError || !strings.Contains(servertest.ResultText(o.res), `"tea"`) {
			t.Fatalf("the call through %s (agent), %s (browser), %s (person): %v %v", agentAt.id, holder.id, personAt.id, o.err, o.res)
		}
		pageLog(t, w.b, tab, "added tea")
		t.Logf("agent at %s, browser at %s, person at %s", agentAt.id, holder.id, personAt.id)
	})

	t.Run("the TypeScript SDK client calls through round-robin", func(t *testing.T) {
		w.enter(t)
		// Each of its requests may reach another instance than the one holding its MCP session,
		// and another again than the one holding the browser.
		got := tsCalls(t, c.URL, w.token, []map[string]any{
			{"name": "listSiteTools", "arguments": map[string]any{}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "ts"}}},
			{"name": "callSiteTool", "arguments": map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "ts again"}}},
		})
		for i, r := range got {
			if r.IsError {
				t.Fatalf("call %d of the TypeScript client through haproxy failed: %+v", i, r)
			}
		}
	})

	t.Run("live events reach the person's page on every instance", func(t *testing.T) {
		w.enter(t)
		var m struct {
			Machine struct{ ID string } `json:"machine"`
		}
		w.person.MustJSON("POST", "/api/machines", map[string]string{"name": "build box"}, 201, &m)
		page := w.b.Tab(t, c.URL+"/")
		for i, at := range c.inst {
			cw.pinBrowser(page, at)
			run(t, page, "the machines page served by "+at.id,
				chromedp.Navigate(c.URL+"/machines"),
				chromedp.WaitVisible(chromedp.CSS(`body[data-live-state="open"]`)))
			from := c.other(at)
			name := fmt.Sprintf("renamed on %s (%d)", from.id, i)
			c.pinned(w.person, from).MustJSON("PATCH", "/api/machines/"+m.Machine.ID, map[string]string{"name": name}, 200, nil)
			run(t, page, "the page at "+at.id+" shows the change made on "+from.id,
				chromedp.Poll[chromedp.Void](`document.body.innerText.includes(`+jsString(name)+`)`))
		}
		cw.pinBrowser(page, nil)
		w.person.MustJSON("DELETE", "/api/machines/"+m.Machine.ID, nil, 204, nil)
	})

	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	t.Run("a viewer on one instance types into a daemon on another, across the daemon's instance dying", func(t *testing.T) {
		w.enter(t)
		w.person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &created)
		m := &machineRig{t: t, person: w.person, machineID: created.Machine.ID}
		m.link = daemontest.StartLink(w.root, c.URL, created.Token, 20*time.Millisecond)
		m.d = m.link.D
		id := m.start(80, 24, testProg(t), "keys")
		holder := c.waitHolder("machine", created.Machine.ID)
		viewerAt := c.other(holder)
		page := w.b.Tab(t, c.URL+"/")
		cw.pinBrowser(page, viewerAt)
		run(t, page, "open the terminal page, served by "+viewerAt.id, chromedp.Navigate(c.URL+"/sessions/"+id))
		termState(t, page, "live")
		mainScreen(t, page, "the program's screen through "+viewerAt.id, "KEYS READY")
		run(t, page, "type", chromedp.Click(chromedp.ID("term-host")), chromedp.KeyEvent("h"))
		mainScreen(t, page, "the echo of what was typed", "got 68")

		holder.kill()
		termState(t, page, "offline")
		moved := c.waitHolder("machine", created.Machine.ID, holder.id)
		termState(t, page, "live")
		run(t, page, "type again", chromedp.Click(chromedp.ID("term-host")), chromedp.KeyEvent("k"))
		mainScreen(t, page, "the echo after the move", "got 6b")
		holder.start()
		c.waitBalanced(holder, true)

		// The daemon's link breaks while its instance lives (a network blip) and it redials through
		// haproxy to another instance: the instance it left forgets the sessions it kept offline, and
		// the viewer follows the daemon.
		from, to := moved, moved
		for try := 0; to == from && try < 8; try++ {
			m.link.Hold()
			testutil.Eventually(t, testutil.WaitMedium, func() bool { return c.holder("machine", created.Machine.ID) == "" }, "the daemon unlinked")
			m.link.Release()
			to = c.waitHolder("machine", created.Machine.ID)
		}
		if to == from {
			t.Fatalf("the daemon redialled %s eight times; haproxy does not balance it", from.id)
		}
		termState(t, page, "live")
		run(t, page, "type after the daemon moved again", chromedp.Click(chromedp.ID("term-host")), chromedp.KeyEvent("m"))
		mainScreen(t, page, "the echo after the daemon moved with its instance alive", "got 6d")
		cw.pinBrowser(page, nil)
		t.Logf("daemon at %s, viewer at %s; daemon moved to %s (killed), then to %s (link broken)", holder.id, viewerAt.id, moved.id, to.id)
	})

	t.Run("an instance killed mid-traffic", func(t *testing.T) {
		w.enter(t)
		w.agent = c.agent(w.root, w.token, nil) // the last one's session may have been on the killed instance
		w.waitOnline(w.agent, "search")
		victim := cw.browserHolder()
		caller := c.other(victim)
		watcher := c.other(victim, caller)
		agent := c.agent(w.root, w.token, caller)
		onVictim := c.agent(t, w.token, victim)
		stream := c.stream(t, w.person, watcher)

		// A call the victim carries: it runs in the page behind the victim's browser socket.
		w.allowAlways("slow", map[string]any{"seconds": 0})
		running := make(chan asyncCall, 1)
		go func() {
			res, err := callOutcomeOf(agent, w.site, w.task, "slow", map[string]any{"seconds": 30}, 60*time.Second)
			running <- asyncCall{res, err}
		}()
		pageLog(t, w.b, tab, "slow started (30 s)")
		// A request the victim holds: its agent waits there for the person.
		asking := make(chan asyncCall, 1)
		go func() {
			res, err := callOutcomeOf(onVictim, w.site, w.task, "addItem", map[string]any{"text": "jam"}, 60*time.Second)
			asking <- asyncCall{res, err}
		}()
		req := w.pending(1)[0]

		killed := time.Now()
		victim.kill()
		select {
		case o := <-running:
			if o.err != nil || !o.res.IsError {
				t.Fatalf("the call the killed instance carried: %v %v; want an error result", o.err, o.res)
			}
			text := servertest.ResultText(o.res)
			if !strings.Contains(text, "instance") {
				t.Fatalf("the call the killed instance carried failed with %q; want it to say the instance went away", text)
			}
			t.Logf("the carried call failed %v after the kill: %s", time.Since(killed).Round(time.Millisecond), text)
			if time.Since(killed) > 5*time.Second {
				t.Fatalf("the carried call took %v to fail; want at once", time.Since(killed))
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the call the killed instance carried did not fail")
		}
		select {
		case <-asking: // its agent's connection went with the instance
		case <-time.After(30 * time.Second):
			t.Fatal("the agent waiting on the killed instance was left hanging")
		}
		testutil.Eventually(t, testutil.WaitLong, func() bool {
			r := w.request(req.ID)
			return r.Status == "withdrawn" && r.WithdrawnReason == "instance_lost"
		}, "the killed instance's request withdrawn as instance_lost")
		inbox := w.b.Tab(t, c.URL+"/tasks/"+w.task)
		run(t, inbox, "the person reads why",
			chromedp.Poll[chromedp.Void](`document.body.innerText.includes("the server instance the agent's call went through stopped")`))
		stream.when(t, `"`+req.ID+`"`) // the watcher's stream, on another instance, stayed open and heard of it
		// The audit log shows the call the killed instance was running for its agent as interrupted
		// as soon as its death is noticed, not once no call could still be running (minutes).
		testutil.Eventually(t, testutil.WaitMedium, func() bool {
			for _, a := range w.audit("addItem") {
				if a.Outcome == "interrupted" {
					return true
				}
			}
			return false
		}, "the killed instance's running call interrupted in the audit log")

		moved := cw.browserHolder(victim.id)
		w.waitOnline(agent, "search")
		if r := w.search(agent, "after the kill"); r.Q != "after the kill" {
			t.Fatalf("search after the kill = %+v", r)
		}
		t.Logf("killed %s (holding the browser and a request); the browser moved to %s; the agent on %s carried on", victim.id, moved.id, caller.id)
		w.agent = agent
		victim.start()
		c.waitBalanced(victim, true)
	})

	t.Run("a rolling restart while an agent calls in a loop", func(t *testing.T) {
		w.enter(t)
		w.waitOnline(c.agent(t, w.token, nil), "search")
		var (
			mu      sync.Mutex
			ok      int
			failed  = map[string]int{}
			lost    []string
			stop    = make(chan struct{})
			stopped = make(chan struct{})
		)
		go func() {
			defer close(stopped)
			var agent *mcp.ClientSession
			defer func() {
				if agent != nil {
					agent.Close()
				}
			}()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var (
					res *mcp.CallToolResult
					err error
				)
				if agent == nil { // the first call, or the session's instance went away: a client starts a new session
					agent, err = c.connectAgent(w.token, nil)
				}
				if err == nil {
					res, err = callOutcomeOf(agent, w.site, "", "search", map[string]any{"q": fmt.Sprint(i)}, 30*time.Second)
				}
				mu.Lock()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					lost = append(lost, fmt.Sprintf("call %d: no answer in 30 s", i))
				case err != nil:
					failed["protocol: "+clip(err.Error())]++
				case res.IsError:
					failed[clip(servertest.ResultText(res))]++
				default:
					ok++
				}
				mu.Unlock()
				if err != nil && agent != nil {
					agent.Close()
					agent = nil
				}
			}
		}()
		okNow := func() int { mu.Lock(); defer mu.Unlock(); return ok }
		for _, in := range c.inst {
			before := okNow()
			in.stop()
			in.start()
			c.waitBalanced(in, true)
			testutil.Eventually(t, testutil.WaitLong, func() bool { return okNow() > before+5 }, "calls succeed again after restarting "+in.id)
		}
		close(stop)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		t.Logf("rolling restart: %d calls succeeded; failed with a clear error: %v", ok, failed)
		if len(lost) > 0 {
			t.Fatalf("calls lost silently: %v", lost)
		}
		for text, n := range failed {
			if strings.TrimSpace(strings.TrimPrefix(text, "protocol: ")) == "" || strings.Contains(text, "Something went wrong") {
				t.Fatalf("a call failed without saying what happened (%d times): %q", n, text)
			}
		}
	})
}
