package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// ownPostgres is a PostgreSQL cluster of the test's own, which it stops and
// starts again (the shared test cluster belongs to others). As in
// scripts/postgres.sh, initdb refuses root, so the cluster runs as postgres.
type ownPostgres struct {
	bin, dir string
	port     int
	URL      string
}

func startOwnPostgres(t *testing.T) *ownPostgres {
	t.Helper()
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdbs) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("PostgreSQL is not installed (scripts/postgres.sh installs it)")
		}
		t.Skip("PostgreSQL is not installed")
	}
	// Not t.TempDir: its parent is private to root, and postgres must reach it.
	dir, err := os.MkdirTemp("", "tabbridge-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &ownPostgres{bin: filepath.Dir(initdbs[0]), dir: dir}
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		if err := os.Chown(p.dir, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	p.run(t, "initdb", "-D", p.dir+"/data", "-U", "postgres", "-A", "trust", "--no-sync")
	p.start(t)
	t.Cleanup(func() { p.pgctl("-m", "immediate", "-w", "stop").Run() })
	return p
}

func (p *ownPostgres) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(p.bin, name)
	if os.Getuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (p *ownPostgres) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := p.command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func (p *ownPostgres) pgctl(args ...string) *exec.Cmd {
	return p.command("pg_ctl", append([]string{"-D", p.dir + "/data"}, args...)...)
}

func (p *ownPostgres) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off", p.port, p.dir)
	if out, err := p.pgctl("-l", p.dir+"/server.log", "-w", "-t", "60", "-o", opts, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(p.dir + "/server.log")
		t.Fatalf("start postgres: %v\n%s\n%s", err, out, log)
	}
}

// stop stops the cluster at once, as a crash or a network cut would.
func (p *ownPostgres) stop(t *testing.T) {
	t.Helper()
	if out, err := p.pgctl("-m", "immediate", "-w", "-t", "60", "stop").CombinedOutput(); err != nil {
		t.Fatalf("stop postgres: %v\n%s", err, out)
	}
}

// TestDatabaseOutageIsSaidAsSuch is issue 11 item 7: with PostgreSQL
// stopped, an MCP request answers 503 with Retry-After and a sentence
// saying the server cannot reach its database (not 500 "internal"); a call
// already past authentication gets a tool result saying the same; /readyz
// is 503 until the database is back, and then everything works again.
func TestDatabaseOutageIsSaidAsSuch(t *testing.T) {
	pg := startOwnPostgres(t)
	db, err := store.Open(context.Background(), store.Options{DatabaseURL: pg.URL, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() }) // after the server's own cleanup
	// One instance: with several, the caches are not trusted while the
	// signal bus is down (it is during an outage), so no request could pass
	// authentication then; this test is about one that did.
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.DB = db; o.SingleInstance = true })
	alice, ids, token := aliceWorld(t, env)
	cold := alice.AgentToken(ids.workspace, "cold") // not used before the outage: its check needs the database

	// A call past authentication: the token's identity was just read (the
	// store keeps it for 2 s), so the request passes the token check and its
	// tool meets the outage. A machine slow enough to let the identity expire
	// while PostgreSQL stops makes the check itself meet it; start over then.
	for attempt := 1; ; attempt++ {
		agent := env.MCP(t, token, nil)
		servertest.CallTool(t, agent, "listTasks", map[string]any{})
		pg.stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "createTask", Arguments: map[string]any{"title": "During the outage"}})
		var call *mcp.CallToolResult
		if err == nil {
			call, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "callSiteTool", Arguments: map[string]any{"site": "https://shop.example", "tool": "buy", "arguments": map[string]any{}}})
		}
		cancel()
		if err == nil {
			for name, r := range map[string]*mcp.CallToolResult{"createTask": res, "callSiteTool": call} {
				text := servertest.ResultText(r)
				if !r.IsError || !strings.Contains(text, "cannot reach its database") || !strings.Contains(text, "Retry in 5 seconds") {
					t.Fatalf("%s during the outage: %q", name, text)
				}
			}
			break
		}
		if attempt == 3 {
			t.Fatalf("createTask never got past authentication before the outage: %v", err)
		}
		pg.start(t)
	}

	// A request whose token check meets the outage: 503 before JSON-RPC.
	req := mustRequest(t, "POST", env.URL+"/mcp", rawInit)
	req.Header.Set("Authorization", "Bearer "+cold)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := env.NewClient(t).HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code, msg := servertest.ErrorOf(body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || code != "database_unreachable" ||
		!strings.Contains(msg, "cannot reach its database") {
		t.Fatalf("MCP request during the outage: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if status, body := env.NewClient(t).Do("GET", "/readyz", nil); status != 503 {
		t.Fatalf("readyz during the outage: %d %s", status, body)
	}

	pg.start(t)
	testutil.Eventually(t, testutil.WaitShort, func() bool { status, _ := env.NewClient(t).Do("GET", "/readyz", nil); return status == 200 }, "the condition never held")
	var back *mcp.ClientSession
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		status, sid, _ := rawMCP(t, env, cold, "", "POST", rawInit)
		return status == 200 && sid != ""
	}, "the condition never held")
	back = env.MCP(t, cold, nil)
	if res := servertest.CallTool(t, back, "createTask", map[string]any{"title": "After the outage"}); res.IsError {
		t.Fatalf("createTask after the outage: %q", servertest.ResultText(res))
	}
}
