package server_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// livePages fills Alice's world so every live region has content (a site
// open in a browser, a machine, a waiting request, a grant, a call) and
// returns each signed-in page's body by path.
func livePages(t *testing.T) map[string]string {
	t.Helper()
	w := newSitesWorld(t, storetest.SQLite)
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	w.alice.MustJSON("POST", "/api/workspaces/"+w.other+"/tasks", map[string]string{"title": "Read"}, 201, &task)
	w.alice.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, nil)
	w.alice.AgentToken(w.other, "reader")
	a := newAsker(t, w.env, w.alice, ids{workspace: w.other, task: task.Task.ID})
	granted, done := a.raise("publish", `{"page":"/"}`)
	answer(w.aliceBrowser, granted.ID, "always", "/").redirect(t, "/")
	decision(t, done)
	a.raise("fill_form", `{"a":1}`)
	if err := w.env.DB.AppendAudit(context.Background(), &store.AuditEntry{UserID: a.uid, WorkspaceID: w.other,
		TokenID: "t", TaskID: task.Task.ID, Site: docsSite, Tool: "publish", Decision: "grant", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, p := range []string{"/", "/grants", "/audit", "/workspaces", "/workspaces/" + w.other, "/tasks/" + task.Task.ID,
		"/sites", "/browsers", "/machines", "/settings"} {
		pg := w.aliceBrowser.get(p)
		pg.want(t, 200)
		pages[p] = pg.body
	}
	return pages
}

// focusable reports whether a person can move focus to n (or, for
// <details>, whether its open state is theirs to keep).
func focusable(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	switch n.Data {
	case "a":
		return attr(n, "href") != ""
	case "input":
		return attr(n, "type") != "hidden"
	case "button", "select", "textarea", "summary", "details":
		return true
	}
	return attr(n, "tabindex") != "" && attr(n, "tabindex") != "-1"
}

// TestLiveRegionsGiveEveryControlAnID: app.js swaps a live region for a
// fresh copy on each event, and can only give focus back, reopen a
// <details> or keep a half-typed value for an element it finds again by id.
// So each focusable element, <details> and field in a live region has one,
// unique on its page.
func TestLiveRegionsGiveEveryControlAnID(t *testing.T) {
	checked := 0
	for path, body := range livePages(t) {
		doc, err := html.Parse(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		seen := map[string]bool{}
		walk(doc, func(n *html.Node) {
			if id := attr(n, "id"); id != "" {
				if seen[id] {
					t.Errorf("%s: id %q is used twice", path, id)
				}
				seen[id] = true
			}
		})
		walk(doc, func(region *html.Node) {
			if attr(region, "data-live") == "" {
				return
			}
			walk(region, func(n *html.Node) {
				if !focusable(n) {
					return
				}
				checked++
				if attr(n, "id") == "" {
					var b strings.Builder
					_ = html.Render(&b, n)
					t.Errorf("%s: in live region #%s, %.160s has no id", path, attr(region, "id"), b.String())
				}
			})
		})
	}
	if checked < 40 {
		t.Fatalf("checked only %d controls in live regions; the pages did not render them", checked)
	}
}

// liveTypes is the union of the event types a page's regions listen for.
func liveTypes(t *testing.T, body string) map[string][]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	walk(doc, func(n *html.Node) {
		if l := attr(n, "data-live"); l != "" {
			out[attr(n, "id")] = strings.Fields(l)
		}
	})
	return out
}

// TestLiveRegionsListenForWhatTheyShow: each region listens for every event
// that changes something it shows, so nothing stays stale on an open page.
func TestLiveRegionsListenForWhatTheyShow(t *testing.T) {
	approval := []string{"approval.created", "approval.decided", "approval.expired", "approval.withdrawn"}
	names := []string{"workspace.updated", "workspace.deleted", "task.updated"}
	want := map[string]map[string][]string{
		"/":       {"nav": append(approval, "workspace.deleted"), "inbox": append(approval, names...)},
		"/grants": {"grants": append([]string{"approval.decided", "grant.revoked", "site.unshared", "site.updated"}, names...)},
		"/audit":  {"audit-list": append([]string{"call.finished"}, names...), "audit-filter": {"call.finished", "task.updated"}},
		"/sites": {"sites": {"site.shared", "site.updated", "site.unshared", "site.tools", "browser.connected", "browser.disconnected",
			"browser.renamed", "browser.sites", "workspace.created", "workspace.updated", "workspace.deleted"},
			"share": {"workspace.created", "workspace.updated", "workspace.deleted"}},
		"/browsers": {"browsers": {"browser.connected", "browser.disconnected", "browser.renamed", "browser.sites", "site.shared",
			"site.updated", "site.unshared", "workspace.updated", "workspace.deleted"}},
		"/machines": {"machines": {"machine.created", "machine.updated", "machine.revoked", "machine.online", "machine.offline",
			"session.started", "session.exited", "session.gone", "session.viewers"}},
		"/workspaces": {"ws-list": {"workspace.created", "workspace.updated", "workspace.deleted"}},
	}
	pages := livePages(t)
	for path, body := range pages {
		got := liveTypes(t, body)
		for region, types := range want[strings.Split(path, "?")[0]] {
			for _, typ := range types {
				if !slices.Contains(got[region], typ) {
					t.Errorf("%s: region #%s does not listen for %s (it listens for %v)", path, region, typ, got[region])
				}
			}
		}
	}
	// The workspace and task pages: a deleted workspace takes them away.
	for path, regions := range map[string]map[string][]string{
		"/workspaces/": {"ws-head": {"workspace.updated", "workspace.deleted"}},
		"/tasks/":      {"task": {"task.updated", "workspace.updated", "workspace.deleted"}, "task-change": {"task.updated"}},
	} {
		checked := false
		for p, body := range pages {
			if !strings.HasPrefix(p, path) {
				continue
			}
			checked = true
			got := liveTypes(t, body)
			for region, types := range regions {
				for _, typ := range types {
					if !slices.Contains(got[region], typ) {
						t.Errorf("%s: region #%s does not listen for %s (it listens for %v)", p, region, typ, got[region])
					}
				}
			}
		}
		if !checked {
			t.Errorf("no page under %s was rendered", path)
		}
	}
	_ = url.Values{}
}
