//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// TestMCPRemoteSignsInWithOAuth: mcp-remote, the stdio-to-HTTP proxy that
// desktop MCP clients (Claude Desktop, Cursor, Windsurf) run to reach a
// remote server, set up as those apps' configs say — `mcp-remote
// <url>/mcp`, no token — against the real server binary with its shipped
// OAuth settings. It discovers the authorization server, registers itself,
// prints the address to open; the person signs in and allows it in
// Chromium; mcp-remote's loopback callback takes the code. An MCP client on
// its stdio side (go-sdk's, standing in for the desktop app) then lists
// the tools and reads a site through it. A second start after the access
// token expired refreshes it with the refresh token mcp-remote saved,
// asking nobody, and again when it expires in the middle of a session.
func TestMCPRemoteSignsInWithOAuth(t *testing.T) {
	bin := repoPath(t, filepath.Join("e2e", "mcpclient", "node_modules", ".bin", "mcp-remote"))
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("mcp-remote is not installed: scripts/test runs 'npm ci' in e2e/mcpclient")
		}
		t.Skip("run 'npm ci' in e2e/mcpclient (scripts/test does) to include this test")
	}
	srv := startOAuthServer(t) // access tokens live 3 s: the second start must refresh
	base := srv.URL
	w := newOAuthE2E(t, srv)
	home := t.TempDir()
	port := freePort(t)

	// proxy starts mcp-remote with the desktop app's client on its stdio;
	// what it writes to standard error (its log, the address to open) goes
	// to lines.
	type proxy struct {
		session *mcp.ClientSession
		err     error
	}
	start := func(ctx context.Context, lines chan<- string) <-chan proxy {
		cmd := exec.CommandContext(ctx, bin, base+"/mcp", fmt.Sprint(port), "--auth-timeout", "120")
		cmd.Env = append(os.Environ(), "HOME="+home, "MCP_REMOTE_CONFIG_DIR="+filepath.Join(home, ".mcp-auth"), "BROWSER=/bin/false", "DISPLAY=")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stderr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-ctx.Done():
				}
			}
			_, _ = io.Copy(io.Discard, stderr)
		}()
		done := make(chan proxy, 1)
		go func() {
			client := mcp.NewClient(&mcp.Implementation{Name: "desktop-app-stand-in", Version: "1.0.0"}, nil)
			s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			done <- proxy{s, err}
		}()
		return done
	}
	var mu sync.Mutex
	var log []string
	printed := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(log, "\n")
	}
	// watch keeps what mcp-remote printed and sends the first authorization
	// address on found.
	authURL := regexp.MustCompile(`https?://\S+/oauth/authorize\?\S+`)
	watch := func(lines <-chan string, found chan<- string) {
		sent := false
		for l := range lines {
			mu.Lock()
			log = append(log, l)
			mu.Unlock()
			if u := authURL.FindString(l); u != "" && !sent {
				found <- u
				sent = true
			}
		}
	}
	use := func(t *testing.T, ctx context.Context, s *mcp.ClientSession) {
		t.Helper()
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list through mcp-remote: %v\n%s", err, printed())
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		if !strings.Contains(strings.Join(names, " "), "callSiteTool") {
			t.Fatalf("mcp-remote lists %v", names)
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool",
			Arguments: map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": "tea"}}})
		if err != nil || res.IsError || !strings.Contains(servertest.ResultText(res), `results for {"q":"tea"}`) {
			t.Fatalf("callSiteTool through mcp-remote: %v %+v\n%s", err, res, printed())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, firstCancel := context.WithCancel(ctx)
	lines := make(chan string, 64)
	found := make(chan string, 1)
	go watch(lines, found)
	done := start(first, lines)
	var u string
	select {
	case u = <-found:
	case p := <-done:
		t.Fatalf("mcp-remote connected (%v) without asking the person to sign in:\n%s", p.err, printed())
	case <-ctx.Done():
		t.Fatalf("mcp-remote printed no authorization address:\n%s", printed())
	}
	if !strings.HasPrefix(u, base+"/oauth/authorize?") {
		t.Fatalf("mcp-remote printed %q, not this server's authorization address", u)
	}
	w.allow(t, u, "MCP CLI Proxy", "localhost")
	var p proxy
	select {
	case p = <-done:
	case <-ctx.Done():
		t.Fatalf("mcp-remote did not connect after the person allowed it:\n%s", printed())
	}
	if p.err != nil {
		t.Fatalf("connect through mcp-remote: %v\n%s", p.err, printed())
	}
	use(t, ctx, p.session)
	p.session.Close()
	firstCancel()

	// Started again, as the desktop app does on its next launch, once the
	// access token it saved has expired: it refreshes, and nobody is asked.
	w.awaitExpiry(t, savedAccessToken(t, filepath.Join(home, ".mcp-auth")))
	lines2 := make(chan string, 64)
	found2 := make(chan string, 1)
	go watch(lines2, found2)
	done2 := start(ctx, lines2)
	select {
	case u := <-found2:
		t.Fatalf("mcp-remote asked the person again (%s) although it holds tokens:\n%s", u, printed())
	case p = <-done2:
	case <-ctx.Done():
		t.Fatalf("mcp-remote did not connect with its saved tokens:\n%s", printed())
	}
	if p.err != nil {
		t.Fatalf("connect again through mcp-remote: %v\n%s", p.err, printed())
	}
	use(t, ctx, p.session)
	// And in the middle of a session, as a desktop app left open does.
	w.awaitExpiry(t, savedAccessToken(t, filepath.Join(home, ".mcp-auth")))
	use(t, ctx, p.session)
	p.session.Close()
}

// savedAccessToken is the access token mcp-remote saved under dir.
func savedAccessToken(t *testing.T, dir string) string {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, "_tokens.json") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("mcp-remote saved %d token files under %s, want 1", len(found), dir)
	}
	raw, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("mcp-remote's saved tokens (%v): access %t, refresh %t", err, tok.AccessToken != "", tok.RefreshToken != "")
	}
	return tok.AccessToken
}
