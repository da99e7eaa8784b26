package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

var writeScreenshots = flag.Bool("screenshots", false, "write every page's screenshots to docs/screenshots/ (also TABBRIDGE_SCREENSHOTS=1)")

// screenshotDir is where the screenshots go, from this package's directory.
const screenshotDir = "../docs/screenshots"

// variant is one way a page is looked at: the popup in light and dark, and a
// full-size window.
type variant struct {
	w, h   int64
	scheme string
}

var variants = []variant{{440, 600, "light"}, {440, 600, "dark"}, {1280, 800, "light"}, {1280, 800, "dark"}}

func (v variant) suffix() string { return fmt.Sprintf("%d-%s", v.w, v.scheme) }

// shot is one page to capture: how to get there, and what shows it arrived.
type shot struct {
	name, caption string
	steps         func() []chromedp.Action[chromedp.Void]
}

func visit(url, ready string) func() []chromedp.Action[chromedp.Void] {
	return func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(ready))}
	}
}

// TestScreenshots renders every page at 440×600 (light and dark) and
// 1280×800 in real Chromium and checks none scrolls sideways in the popup.
// With -screenshots (or TABBRIDGE_SCREENSHOTS=1) it writes them as PNGs to
// docs/screenshots/, with an index.
func TestScreenshots(t *testing.T) {
	write := *writeScreenshots || os.Getenv("TABBRIDGE_SCREENSHOTS") == "1"
	// The test browsers of the sites shots stay connected without pinging.
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Bridge.Idle = 10 * time.Minute })
	ctx := startBrowser(t)
	var taken []shot
	capture := func(s shot) {
		t.Helper()
		for _, v := range variants {
			run(t, ctx, s.name+" "+v.suffix(), append([]chromedp.Action[chromedp.Void]{viewport(v.w, v.h, v.scheme)}, s.steps()...)...)
			noHorizontalScroll(t, ctx, s.name, v.w)
			layoutRules(t, ctx, s.name, v.w)
			png := get(t, ctx, "capture "+s.name, chromedp.FullScreenshot(100))
			if write {
				if err := os.WriteFile(filepath.Join(screenshotDir, s.name+"-"+v.suffix()+".png"), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		taken = append(taken, s)
	}

	capture(shot{"setup", "First run: the owner account", visit(env.URL+"/", `form[action="/setup"]`)})
	owner := env.NewClient(t)
	owner.MustJSON("POST", "/api/setup", map[string]string{"email": "alice@example.com", "name": "Alice Moreau", "password": "correct horse"}, 201, nil)
	var inv struct {
		URL string `json:"url"`
	}
	owner.MustJSON("POST", "/api/invitations", map[string]string{"note": "for Sam"}, 201, &inv)
	capture(shot{"signin", "Sign in", visit(env.URL+"/signin", `form[action="/signin"]`)})
	capture(shot{"invite", "Accepting an invitation", visit(inv.URL, `form[action^="/invite/"]`)})

	run(t, ctx, "sign in",
		chromedp.Navigate(env.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse"),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.ID("inbox-empty")),
	)
	capture(shot{"workspaces-empty", "Workspaces, before the first", visit(env.URL+"/workspaces", `#ws-list .empty`)})
	capture(shot{"inbox-empty", "The inbox with nothing waiting (the home page, where the popup opens)", visit(env.URL+"/", `#inbox-empty`)})
	capture(shot{"grants-empty", "Grants, before the first", visit(env.URL+"/grants", `#grants .empty`)})
	capture(shot{"audit-empty", "The audit log, before the first call", visit(env.URL+"/audit", `#audit-list .empty`)})
	sitesEmptyShots(env, capture)

	ws := owner.Workspace("Docs site")
	billingWS := owner.Workspace("Billing dashboard")
	secret := owner.AgentToken(ws, "laptop")
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	owner.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	in30 := store.Now().Add(30 * 24 * time.Hour)
	if _, _, err := env.DB.CreateAgentTokenUntil(context.Background(), me.User.ID, ws, "build box", &in30); err != nil { // a token with an expiry
		t.Fatal(err)
	}
	env.Agent(t, secret).MustJSON("GET", "/api/agent/workspace", nil, 200, nil)
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	for i, tk := range []struct{ title, status string }{
		{"Fix broken links in the API guide", "completed"},
		{"Publish the release notes for 2.4", "blocked"},
		{"Update the pricing page copy", "ongoing"},
	} {
		owner.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": tk.title, "status": tk.status}, 201, &task)
		_ = i
	}
	capture(shot{"workspaces", "Workspaces", visit(env.URL+"/workspaces", `#ws-list .list`)})
	capture(shot{"workspace", "A workspace: its agent tokens and tasks", visit(env.URL+"/workspaces/"+ws, `#tasks .list`)})
	capture(shot{"workspace-token-created", "A new agent token, shown once with its Claude Code command", func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(env.URL + "/workspaces/" + ws),
			chromedp.SendKeys(chromedp.ID("token-name"), "cloud vm"),
			chromedp.Submit(chromedp.ID("token-name")),
			chromedp.WaitVisible(chromedp.ID("mcp-command")),
		}
	}})
	oauthShots(t, env, owner, ws, capture)
	approvalShots(t, ctx, env, owner, ws, task.Task.ID, capture)
	sitesShots(t, ctx, env, owner, ws, billingWS, capture)
	capture(shot{"workspace-delete", "Deleting a workspace asks first", visit(env.URL+"/workspaces/"+ws+"/delete", `.btn-danger-solid`)})
	capture(shot{"task", "A task: its approvals and calls in time order", visit(env.URL+"/tasks/"+task.Task.ID, `#timeline .list`)})
	capture(shot{"nav-more", "The More menu: Browsers, Grants and Audit", func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.Navigate(env.URL + "/grants"), chromedp.Click(chromedp.ID("nav-more")), chromedp.WaitVisible(chromedp.ID("nav-audit"))}
	}})
	capture(shot{"user-menu", "The person's menu: Settings and Sign out", func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.Navigate(env.URL + "/"), chromedp.Click(chromedp.ID("user-menu-button")), chromedp.WaitVisible(chromedp.ID("sign-out"))}
	}})
	// The menus work from the keyboard: Enter opens, Tab reaches the entries, Escape closes and gives focus back.
	run(t, ctx, "the account menu from the keyboard", chromedp.Navigate(env.URL+"/"), chromedp.Focus(chromedp.ID("user-menu-button")),
		chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.ID("nav-settings")),
		chromedp.KeyEvent(kb.Escape), chromedp.Poll[chromedp.Void](`!document.getElementById('user-menu').open`))
	if id := get(t, ctx, "focus after Escape", chromedp.Evaluate[string](`document.activeElement.id`)); id != "user-menu-button" {
		t.Errorf("after Escape focus is on %q, want the menu's button", id)
	}
	capture(shot{"settings", "Settings: password, where you are signed in, invitations (owner)", visit(env.URL+"/settings", `#inv-note`)})
	capture(shot{"settings-invitation-created", "A new invitation link, shown once", func() []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(env.URL + "/settings"),
			chromedp.SendKeys(chromedp.ID("inv-note"), "for Priya"),
			chromedp.Submit(chromedp.ID("inv-note")),
			chromedp.WaitVisible(chromedp.ID("invite-url")),
		}
	}})
	machineShots(t, ctx, env, owner, capture)
	capture(shot{"not-found", "Someone else's (or no) workspace", visit(env.URL+"/workspaces/nope", `main .card`)})

	if write {
		writeIndex(t, taken)
	}
}

// writeIndex lists the screenshots in docs/screenshots/README.md.
func writeIndex(t *testing.T, shots []shot) {
	var b strings.Builder
	b.WriteString("# Screenshots\n\nEvery page of the web app, rendered by real headless Chromium at the popup's size (440×600,\n" +
		"light and dark) and full-size (1280×800, light and dark). Regenerate with `go test ./e2e -run TestScreenshots -screenshots`.\n")
	for _, s := range shots {
		fmt.Fprintf(&b, "\n## %s\n\n", s.caption)
		for _, v := range variants {
			fmt.Fprintf(&b, "<img src=\"%s-%s.png\" alt=\"%s, %d×%d, %s\" width=\"%d\">\n", s.name, v.suffix(), s.caption, v.w, v.h, v.scheme, v.w/2)
		}
	}
	b.WriteString("\n# The extension\n\nRendered by `TestScreenshotsExtension` (the real extension in Chromium, a live server).\n")
	for _, s := range extensionShots {
		fmt.Fprintf(&b, "\n## %s\n\n", s.caption)
		vs := popupVariants
		if strings.HasPrefix(s.name, "extension-options") {
			vs = variants
		}
		for _, v := range vs {
			fmt.Fprintf(&b, "<img src=\"%s-%s.png\" alt=\"%s, %d×%d, %s\" width=\"%d\">\n", s.name, v.suffix(), s.caption, v.w, v.h, v.scheme, v.w/2)
		}
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, "README.md"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
