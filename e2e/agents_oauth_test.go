//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// TestCodexSignsInWithOAuth: Codex with no token at all — `codex mcp login`
// discovers Tabbridge's authorization server, registers itself, and the
// person allows it on the consent page in Chromium; then `codex exec` calls
// the site's tool with the access token Codex got, as README.md's "Connect
// an agent" says. Codex's OAuth client is the Rust rmcp's, not the
// TypeScript SDK's the other OAuth tests run.
//
// Client ID metadata documents are off here: Codex's document lives on
// chatgpt.com, which this machine cannot reach (docs/DECISIONS.md, MCP
// authorization), so Codex registers dynamically, as it does with any
// server that does not offer them.
func TestCodexSignsInWithOAuth(t *testing.T) {
	bin := agentBin(t, "codex")
	base := startServerBinary(t, "--extension-ids", servertest.ExtensionID, "--oauth-metadata-documents=false")
	env := &servertest.Env{URL: base}
	env.Opts.PublicURL = base
	w := newOAuthE2E(t, &binaryServer{URL: base, env: env})

	model := newScriptedModel(t,
		agentStep{Tool: "listSiteTools", Input: map[string]any{}},
		agentStep{Tool: "callSiteTool", Input: map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "tea"}}},
		agentStep{Text: "Found tea."},
	)
	home, work, cxEnv := codexHome(t, model.URL, fmt.Sprintf("[mcp_servers.tabbridge]\nurl = %q\n", base+"/mcp")+codexApproveCalls)
	// No browser for Codex to open (BROWSER fails): it prints the address, as
	// on a remote machine, and the person opens it.
	cxEnv = append(cxEnv, "BROWSER=/bin/false")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	login := exec.CommandContext(ctx, bin, "mcp", "login", "tabbridge")
	login.Dir, login.Env = work, cxEnv
	killGroup(login)
	out, err := login.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	login.Stderr = login.Stdout
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	authURL := regexp.MustCompile(`https?://\S+/oauth/authorize\?\S+`)
	var printed []string
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			printed = append(printed, sc.Text())
			if u := authURL.FindString(sc.Text()); u != "" && !sent {
				found <- u
				sent = true
			}
		}
		close(found)
	}()
	var u string
	select {
	case u = <-found:
	case <-ctx.Done():
	}
	if u == "" {
		t.Fatalf("codex mcp login printed no authorization address: %q", printed)
	}
	if !strings.HasPrefix(u, base+"/oauth/authorize?") {
		t.Fatalf("codex would authorize at %s, want this server", u)
	}

	run(t, w.ctx, "open the address Codex printed", viewport(440, 600, "light"), chromedp.Navigate(u))
	run(t, w.ctx, "sign in",
		chromedp.WaitVisible(chromedp.CSS(`form[action="/signin"]`)),
		chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
		chromedp.SendKeys(chromedp.ID("password"), "password-alice@example.com"),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button[type=submit]`)),
	)
	run(t, w.ctx, "see the consent page", chromedp.WaitVisible(chromedp.ID("consent-allow")))
	name := get(t, w.ctx, "read the client", chromedp.Text(chromedp.ID("consent-client")))
	if name == "" {
		t.Fatal("the consent page names no app")
	}
	t.Logf("Codex registered as %q", name)
	if host := get(t, w.ctx, "read the host", chromedp.Text(chromedp.ID("consent-host"))); host != "127.0.0.1" {
		t.Fatalf("consent page shows Codex (%q) as from %q, want 127.0.0.1 (an app on this computer)", name, host)
	}
	run(t, w.ctx, "pick the workspace and allow",
		chromedp.SetValue(chromedp.ID("consent-workspace"), w.ws),
		chromedp.Click(chromedp.ID("consent-allow")),
	)
	if err := login.Wait(); err != nil {
		t.Fatalf("codex mcp login: %v\n%s", err, strings.Join(printed, "\n"))
	}

	// The person sees the app they allowed on the workspace's page.
	code, page := w.person.Do("GET", "/workspaces/"+w.ws, nil)
	if code != 200 || !strings.Contains(string(page), name) {
		t.Fatalf("the workspace page (%d) does not list %q", code, name)
	}

	// Codex calls through Tabbridge with the token it got: no token was pasted anywhere.
	last := filepath.Join(home, "last.txt")
	exe := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check", "--output-last-message", last, "Search the shop for tea.")
	exe.Dir, exe.Env = work, cxEnv
	killGroup(exe)
	if out, err := exe.CombinedOutput(); err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	got := model.Results()
	if len(got) != 2 || got[0].Tool != "listSiteTools" || !strings.Contains(got[0].Text, w.site) ||
		got[1].Tool != "callSiteTool" || !strings.Contains(got[1].Text, `results for {"q":"tea"}`) {
		t.Fatalf("Codex's tool results %+v", got)
	}
	if msg, _ := os.ReadFile(last); strings.TrimSpace(string(msg)) != "Found tea." {
		t.Errorf("Codex's last message %q", msg)
	}
}
