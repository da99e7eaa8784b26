//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/creack/pty"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// TestRealAgentsSignInWithOAuth: Claude Code, Codex, Gemini CLI and OpenCode
// with no token at all — `claude mcp login` / `codex mcp login` /
// `opencode mcp auth` (Gemini CLI: its first prompt) discovers Tabbridge's
// authorization server, registers itself, and prints an address (there is no
// browser for it to open, as on a remote machine; Gemini CLI's goes to its
// browser, see geminiOAuth); the person opens it in
// Chromium, signs in and allows it; the agent's own loopback callback takes
// the code. Then the agent calls the site's tool with the token it got, as
// README.md's "Connect an agent" says. Their OAuth clients are their own
// (Claude Code's, Gemini CLI's and OpenCode's on the TypeScript SDK, Codex's
// the Rust rmcp's), not the SDK providers the other OAuth tests run.
//
// Client ID metadata documents are off here: Claude Code's and Codex's live
// on their vendors' domains (claude.ai, chatgpt.com), which this machine
// cannot reach (docs/DECISIONS.md, MCP authorization), so they register
// dynamically, as they do with any server that does not offer them.
func TestRealAgentsSignInWithOAuth(t *testing.T) {
	agents := []struct {
		name, bin string
		// setUp writes the agent's home with Tabbridge at url and no token; login starts
		// its sign-in and returns what it prints; run runs one prompt with what it holds.
		setUp func(t *testing.T, model, url string) (login func(ctx context.Context) (io.Reader, func() error), run func(ctx context.Context, prompt string) (string, error))
		host  string // where the consent page says the app is
	}{
		{"Claude Code", "claude", claudeOAuth, "localhost"},
		{"Codex", "codex", codexOAuth, "127.0.0.1"},
		{"Gemini CLI", "gemini", geminiOAuth, "localhost"},
		{"OpenCode", "opencode", openCodeOAuth, "127.0.0.1"},
	}
	for _, a := range agents {
		agentBin(t, a.bin)
	}
	base := startServerBinary(t, "--extension-ids", servertest.ExtensionID, "--oauth-metadata-documents=false")
	env := &servertest.Env{URL: base}
	env.Opts.PublicURL = base
	w := newOAuthE2E(t, &binaryServer{URL: base, env: env})
	signedIn := false
	authURL := regexp.MustCompile(`https?://[^\s\x1b]+/oauth/authorize\?[^\s\x1b]+`)

	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			model := newScriptedModel(t,
				agentStep{Tool: "listSiteTools", Input: map[string]any{}},
				agentStep{Tool: "callSiteTool", Input: map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "tea"}}},
				agentStep{Text: "Found tea."},
			)
			login, runPrompt := a.setUp(t, model.URL, base)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, wait := login(ctx)
			var mu sync.Mutex
			var lines []string
			printed := func() string {
				mu.Lock()
				defer mu.Unlock()
				return strings.Join(lines, "\n")
			}
			found := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(out)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				sent := false
				for sc.Scan() {
					mu.Lock()
					lines = append(lines, sc.Text())
					mu.Unlock()
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
			if !strings.HasPrefix(u, base+"/oauth/authorize?") {
				t.Fatalf("%s login printed no authorization address of this server:\n%s", a.bin, printed())
			}

			run(t, w.ctx, "open the address the agent printed", viewport(440, 600, "light"), chromedp.Navigate(u))
			if !signedIn {
				run(t, w.ctx, "sign in",
					chromedp.WaitVisible(chromedp.CSS(`form[action="/signin"]`)),
					chromedp.SendKeys(chromedp.ID("email"), "alice@example.com"),
					chromedp.SendKeys(chromedp.ID("password"), "password-alice@example.com"),
					chromedp.Click(chromedp.CSS(`form[action="/signin"] button[type=submit]`)),
				)
				signedIn = true
			}
			run(t, w.ctx, "see the consent page", chromedp.WaitVisible(chromedp.ID("consent-allow")))
			name := get(t, w.ctx, "read the client", chromedp.Text(chromedp.ID("consent-client")))
			if name == "" {
				t.Fatal("the consent page names no app")
			}
			t.Logf("%s registered as %q", a.name, name)
			if host := get(t, w.ctx, "read the host", chromedp.Text(chromedp.ID("consent-host"))); host != a.host {
				t.Fatalf("consent page shows %s (%q) as from %q, want %s (an app on this computer)", a.name, name, host, a.host)
			}
			run(t, w.ctx, "pick the workspace and allow",
				chromedp.SetValue(chromedp.ID("consent-workspace"), w.ws),
				chromedp.Click(chromedp.ID("consent-allow")),
			)
			if err := wait(); err != nil {
				t.Fatalf("%s login: %v\n%s", a.bin, err, printed())
			}

			// The person sees the app they allowed on the workspace's page.
			code, page := w.person.Do("GET", "/workspaces/"+w.ws, nil)
			if code != 200 || !strings.Contains(string(page), name) {
				t.Fatalf("the workspace page (%d) does not list %q", code, name)
			}

			// The agent calls through Tabbridge with the token it got: no token was pasted anywhere.
			final, err := runPrompt(ctx, "Search the shop for tea.")
			if err != nil {
				t.Fatal(err)
			}
			got := model.Results()
			if len(got) != 2 || got[0].Tool != "listSiteTools" || !strings.Contains(got[0].Text, w.site) ||
				got[1].Tool != "callSiteTool" || !strings.Contains(got[1].Text, `results for {"q":"tea"}`) {
				t.Fatalf("%s's tool results %+v", a.name, got)
			}
			if final != "Found tea." {
				t.Errorf("%s's last message %q", a.name, final)
			}
		})
	}
}

// claudeOAuth sets Claude Code up with Tabbridge added the way README.md
// says (`claude mcp add --transport http tabbridge <url>/mcp`, no header).
// Its login needs a terminal, so it runs in a PTY, 400 columns wide so the
// address it prints is on one line.
func claudeOAuth(t *testing.T, model, url string) (func(ctx context.Context) (io.Reader, func() error), func(ctx context.Context, prompt string) (string, error)) {
	bin := agentBin(t, "claude")
	_, work, env := claudeHome(t, model)
	add := exec.Command(bin, "mcp", "add", "--transport", "http", "tabbridge", url+"/mcp")
	add.Dir, add.Env = work, env
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("claude mcp add: %v\n%s", err, out)
	}
	env = append(env, "BROWSER=/bin/false")
	login := func(ctx context.Context) (io.Reader, func() error) {
		cmd := exec.CommandContext(ctx, bin, "mcp", "login", "tabbridge")
		cmd.Dir, cmd.Env = work, env
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 400, Rows: 40})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, cmd.Wait
	}
	cc := &claudeCode{bin: bin, work: work, env: env}
	return login, cc.exec
}

// codexOAuth sets Codex up with Tabbridge in its config and no token.
func codexOAuth(t *testing.T, model, url string) (func(ctx context.Context) (io.Reader, func() error), func(ctx context.Context, prompt string) (string, error)) {
	bin := agentBin(t, "codex")
	home, work, env := codexHome(t, model, fmt.Sprintf("[mcp_servers.tabbridge]\nurl = %q\n", url+"/mcp")+codexApproveCalls)
	env = append(env, "BROWSER=/bin/false")
	login := func(ctx context.Context) (io.Reader, func() error) {
		return startLogin(ctx, t, work, env, bin, "mcp", "login", "tabbridge")
	}
	cx := &codex{bin: bin, home: home, work: work, env: env}
	return login, cx.exec
}

// geminiOAuth sets Gemini CLI up with Tabbridge in its settings and no
// token (httpUrl, and OAuth on, as README.md says). Gemini CLI has no login
// command outside its interactive screen: its first prompt finds the server
// asking for OAuth, asks on its input whether to go on (answered "y", as a
// person would), opens the address in the browser (xdg-open: here a stand-in
// that hands the address to the test, which opens it in Chromium) and waits
// for its loopback callback, then runs the prompt with the token it got.
// The address goes to the browser only: in a headless run Gemini CLI 0.61.0
// holds back the message that prints it until its MCP servers are set up,
// that is, until after the sign-in. The prompt run after that uses the
// stored token, with no sign-in.
func geminiOAuth(t *testing.T, model, url string) (func(ctx context.Context) (io.Reader, func() error), func(ctx context.Context, prompt string) (string, error)) {
	bin := agentBin(t, "gemini")
	home, work, env := geminiHome(t, model, map[string]any{"httpUrl": url + "/mcp", "oauth": map[string]any{"enabled": true}})
	browser := filepath.Join(home, "browser")
	fifo := filepath.Join(browser, "opened")
	if err := os.MkdirAll(browser, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nprintf '%s\\n' \"$1\" > " + fifo + "\n"
	if err := os.WriteFile(filepath.Join(browser, "xdg-open"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	env = append(env, "GEMINI_FORCE_FILE_STORAGE=true", "PATH="+browser+":"+os.Getenv("PATH"))
	g := &geminiCLI{bin: bin, home: home, work: work, env: env}
	login := func(ctx context.Context) (io.Reader, func() error) {
		// Read and write: opening does not wait for a writer, and the reader sees no end between two.
		opened, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bin, g.args("Sign in to Tabbridge and search the shop for tea.")...)
		cmd.Dir, cmd.Env = work, g.env
		killGroup(cmd)
		cmd.Stdin = strings.NewReader("y\n")
		r, w := io.Pipe()
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go io.Copy(w, opened)
		ended := make(chan error, 1)
		go func() {
			err := cmd.Wait()
			opened.Close()
			w.Close()
			ended <- err
		}()
		return r, func() error { return <-ended }
	}
	return login, g.exec
}

// openCodeOAuth sets OpenCode up with Tabbridge in its opencode.json and no
// token, as README.md says; `opencode mcp auth tabbridge` prints the address
// (and would open it in a browser: here there is none) and waits on its
// fixed loopback callback (127.0.0.1:19876).
func openCodeOAuth(t *testing.T, model, url string) (func(ctx context.Context) (io.Reader, func() error), func(ctx context.Context, prompt string) (string, error)) {
	bin := agentBin(t, "opencode")
	home, work, env := openCodeHome(t, model, map[string]any{"type": "remote", "url": url + "/mcp", "enabled": true})
	// No browser on this machine: its xdg-open fails, as on a remote one.
	noBrowser := filepath.Join(home, "no-browser")
	if err := os.MkdirAll(noBrowser, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noBrowser, "xdg-open"), []byte("#!/bin/sh\nexit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	env = append(env, "PATH="+noBrowser+":"+os.Getenv("PATH"))
	login := func(ctx context.Context) (io.Reader, func() error) {
		return startLogin(ctx, t, work, env, bin, "mcp", "auth", "tabbridge")
	}
	o := &openCode{bin: bin, home: home, work: work, env: env}
	return login, o.exec
}

// startLogin starts an agent's log-in command in its own process group
// and returns what it prints (standard output and error together) and a
// wait for its end.
func startLogin(ctx context.Context, t *testing.T, dir string, env []string, bin string, args ...string) (io.Reader, func() error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	killGroup(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return out, cmd.Wait
}
