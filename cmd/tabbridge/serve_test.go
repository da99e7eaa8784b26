package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testbin"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// startServe runs `tabbridge serve` in-process with the given environment and
// returns its address; the server stops when the test ends.
func startServe(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--log-level", "warn"}, args...)
	go func() { done <- run(ctx, args, func(k string) string { return env[k] }, io.Discard, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	})
	select {
	case addr := <-ready:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("serve failed to start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start within 60s")
	}
	return ""
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestServeOnEmbeddedDatabaseKeepsItsKey(t *testing.T) {
	dir := t.TempDir()
	url := startServe(t, map[string]string{"TABBRIDGE_DATA_DIR": dir})
	if got := getStatus(t, url+"/readyz"); got != 200 {
		t.Fatalf("readyz: %d", got)
	}
	key, err := os.ReadFile(filepath.Join(dir, "jwt.key"))
	if err != nil || len(strings.TrimSpace(string(key))) < 32 {
		t.Fatalf("signing key not generated: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tabbridge.db")); err != nil {
		t.Fatalf("sqlite file not created: %v", err)
	}
	info, _ := os.Stat(filepath.Join(dir, "jwt.key"))
	if info.Mode().Perm() != 0o600 {
		t.Errorf("jwt.key mode %v, want 0600", info.Mode().Perm())
	}
}

func TestFourInstancesStartTogetherOnFreshPostgres(t *testing.T) {
	dbURL := storetest.FreshPostgres(t)
	env := map[string]string{"DATABASE_URL": dbURL, "TABBRIDGE_JWT_KEY": strings.Repeat("k", 32), "TABBRIDGE_DATA_DIR": t.TempDir()}
	var wg sync.WaitGroup
	urls := make([]string, 4)
	for i := range urls {
		wg.Add(1)
		go func(i int) { defer wg.Done(); urls[i] = startServe(t, env) }(i)
	}
	wg.Wait()
	for _, u := range urls {
		if got := getStatus(t, u+"/readyz"); got != 200 {
			t.Errorf("%s readyz: %d", u, got)
		}
	}
}

func TestConfigErrorsAreClear(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"DATABASE_URL": "mysql://x"}, nil, "must start with postgres://"},
		{map[string]string{"TABBRIDGE_JWT_KEY": "short"}, nil, "at least 32 bytes"},
		{nil, []string{"--log-level", "loud"}, "log level"},
		{map[string]string{"TABBRIDGE_OPEN_SIGNUP": "yes"}, nil, `TABBRIDGE_OPEN_SIGNUP="yes": want true or false`},
		{map[string]string{"TABBRIDGE_APPROVAL_WINDOW": "300"}, nil, `TABBRIDGE_APPROVAL_WINDOW="300": want a positive duration`},
		{map[string]string{"TABBRIDGE_MCP_SESSION_TIMEOUT": "-1s"}, nil, "TABBRIDGE_MCP_SESSION_TIMEOUT"},
		{nil, []string{"--approval-window", "-5s"}, "--approval-window -5s: want a positive duration"},
		{nil, []string{"--mcp-session-timeout", "0s"}, "--mcp-session-timeout"},
		{map[string]string{"TABBRIDGE_APPROVAL_GRACE": "30"}, nil, `TABBRIDGE_APPROVAL_GRACE="30": want a positive duration`},
		{nil, []string{"--approval-grace", "0s"}, "--approval-grace 0s: want a positive duration"},
		{map[string]string{"TABBRIDGE_SHUTDOWN_TIMEOUT": "10"}, nil, `TABBRIDGE_SHUTDOWN_TIMEOUT="10": want a positive duration`},
		{map[string]string{"TABBRIDGE_MCP_SESSIONS_PER_TOKEN": "many"}, nil, `TABBRIDGE_MCP_SESSIONS_PER_TOKEN="many": want a positive whole number`},
		{map[string]string{"TABBRIDGE_APPROVALS_PENDING_MAX": "0"}, nil, "TABBRIDGE_APPROVALS_PENDING_MAX"},
		{map[string]string{"TABBRIDGE_APPROVALS_PENDING_BYTES": "4MiB"}, nil, "TABBRIDGE_APPROVALS_PENDING_BYTES"},
		{nil, []string{"--browser-calls-max", "0"}, "--browser-calls-max 0: want a positive whole number"},
		{nil, []string{"--open-documents-max", "-1"}, "--open-documents-max -1: want a positive whole number"},
		{map[string]string{"TABBRIDGE_TOOL_BYTES_MAX": "64MiB"}, nil, `TABBRIDGE_TOOL_BYTES_MAX="64MiB": want a positive whole number`},
	}
	for _, c := range cases {
		env := map[string]string{"TABBRIDGE_DATA_DIR": t.TempDir()}
		for k, v := range c.env {
			env[k] = v
		}
		err := run(context.Background(), append([]string{"serve", "--listen", "127.0.0.1:0"}, c.args...), func(k string) string { return env[k] }, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: got %v, want an error mentioning %q", c.env, c.args, err, c.want)
		}
	}
}

// TestShutdownTimeoutFromTheEnvironment: the shutdown grace is a setting
// like the others, read from TABBRIDGE_SHUTDOWN_TIMEOUT, and the flag wins.
func TestShutdownTimeoutFromTheEnvironment(t *testing.T) {
	env := func(k string) string {
		if k == "TABBRIDGE_SHUTDOWN_TIMEOUT" {
			return "45s"
		}
		return ""
	}
	c, err := parseServe(nil, env, io.Discard)
	if err != nil || c.shutdownWait != 45*time.Second {
		t.Fatalf("from the environment: %v, %v; want 45s", c.shutdownWait, err)
	}
	c, err = parseServe([]string{"--shutdown-timeout", "3s"}, env, io.Discard)
	if err != nil || c.shutdownWait != 3*time.Second {
		t.Fatalf("the flag over the environment: %v, %v; want 3s", c.shutdownWait, err)
	}
}

func TestPublicURLDefaultsToAnAddressABrowserCanUse(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		":8080":          "http://localhost:8080",
		"0.0.0.0:9000":   "http://localhost:9000",
		"[::]:9000":      "http://localhost:9000",
		"tb.internal:80": "http://tb.internal:80",
	} {
		c, err := parseServe([]string{"--listen", listen}, func(string) string { return "" }, io.Discard)
		if err != nil || c.publicURL != want {
			t.Errorf("--listen %s: public URL %v %v, want %s", listen, c, err, want)
		}
	}
	if _, err := parseServe([]string{"--listen", "8080"}, func(string) string { return "" }, io.Discard); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("--listen 8080: %v", err)
	}
}

// TestFirstStartSaysWhereToCreateTheOwner: with no account yet the console
// says, at info level, which address to open; once there is one it does not.
func TestFirstStartSaysWhereToCreateTheOwner(t *testing.T) {
	dir := t.TempDir()
	start := func(create bool) string {
		logs := testbin.NewLog() // the server's goroutines write while the test reads
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan error, 1)
		args := []string{"serve", "--listen", "127.0.0.1:0", "--public-url", "http://tabbridge.test:8080"}
		go func() {
			done <- run(ctx, args, func(k string) string { return map[string]string{"TABBRIDGE_DATA_DIR": dir}[k] }, logs, ready)
		}()
		select {
		case addr := <-ready:
			// A request first: shutting down before Serve has started would leave it serving.
			if got := getStatus(t, "http://"+addr+"/readyz"); got != 200 {
				t.Fatalf("readyz: %d", got)
			}
			if create {
				createOwner(t, "http://"+addr)
			}
		case err := <-done:
			t.Fatalf("serve failed to start: %v", err)
		case <-time.After(60 * time.Second):
			t.Fatal("serve did not start within 60s")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve returned %v", err)
		}
		return logs.String()
	}
	first := start(true)
	if !strings.Contains(first, "first start: open http://tabbridge.test:8080/setup to create the owner account") {
		t.Fatalf("first start logs lack the setup address:\n%s", first)
	}
	if !strings.Contains(first, `msg="account created"`) {
		t.Fatalf("creating the owner was not logged:\n%s", first)
	}
	if again := start(false); strings.Contains(again, "/setup") {
		t.Fatalf("with an owner the console still points at setup:\n%s", again)
	}
}

// createOwner creates the owner account through the JSON API, as the setup page would.
func createOwner(t *testing.T, base string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Transport: &http.Transport{DisableKeepAlives: true}} // an idle keep-alive would hold up the shutdown
	resp, err := c.Get(base + "/api/auth/csrf")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		CSRFToken string `json:"csrfToken"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	req, _ := http.NewRequest("POST", base+"/api/setup", strings.NewReader(`{"email":"o@example.com","name":"Owner","password":"correct horse"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", tok.CSRFToken)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("setup: %d", resp.StatusCode)
	}
}

func TestApprovalGraceFromFlagOrEnvironment(t *testing.T) {
	c, err := parseServe(nil, func(string) string { return "" }, io.Discard)
	if err != nil || c.goneGrace != 30*time.Second {
		t.Fatalf("default grace %v (%v), want 30s", c.goneGrace, err)
	}
	c, err = parseServe(nil, func(k string) string { return map[string]string{"TABBRIDGE_APPROVAL_GRACE": "45s"}[k] }, io.Discard)
	if err != nil || c.goneGrace != 45*time.Second {
		t.Fatalf("grace from the environment %v (%v), want 45s", c.goneGrace, err)
	}
	c, err = parseServe([]string{"--approval-grace", "10s"}, func(k string) string { return map[string]string{"TABBRIDGE_APPROVAL_GRACE": "45s"}[k] }, io.Discard)
	if err != nil || c.goneGrace != 10*time.Second {
		t.Fatalf("grace from the flag %v (%v), want 10s", c.goneGrace, err)
	}
}
