package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, to read the registry
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// The cluster's registry periods: short, so a killed instance is taken for
// dead within a second and the failure tests stay quick.
const (
	clusterHeartbeat = 200 * time.Millisecond
	clusterDeadAfter = time.Second
)

// pinCookie and pinHeader make haproxy send a request to one named instance
// instead of the next in turn; the tests use them to put an agent, a person
// and a browser on instances of their choosing. Without them haproxy
// balances round-robin, request by request.
const (
	pinCookie = "tb_pin"
	pinHeader = "X-Tb-Pin"
)

// instance is one `tabbridge serve` process of a cluster.
type instance struct {
	c        *cluster
	id       string // its --instance-id, also its name in haproxy
	addr     string // where it listens: the address haproxy reaches it at
	internal string // its internal listener: the address the other instances reach it at
	logf     string // its log file
	cmd      *exec.Cmd
	exited   chan struct{}
}

// cluster is three instances of the real server binary on one fresh
// PostgreSQL database with one signing key, behind a real haproxy that
// balances them round-robin and checks each one's /readyz.
type cluster struct {
	t         testing.TB
	pg        string // the database URL
	db        *sql.DB
	dir       string
	proxyAddr string
	URL       string // haproxy's address: the only one people, browsers, daemons and agents use
	inst      []*instance
	proxy     *exec.Cmd
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startCluster starts n instances and haproxy in front of them, and returns
// once haproxy sees every instance ready.
func startCluster(t testing.TB, n int) *cluster {
	t.Helper()
	hp := toolPath(t, "haproxy", "haproxy")
	c := &cluster{t: t, pg: storetest.FreshPostgres(t), dir: t.TempDir(), proxyAddr: freeAddr(t)}
	c.URL = "http://" + c.proxyAddr
	db, err := sql.Open("pgx", c.pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c.db = db
	for i := range n {
		in := &instance{c: c, id: fmt.Sprintf("web-%d", i+1), addr: freeAddr(t), internal: freeAddr(t)}
		in.logf = filepath.Join(c.dir, in.id+".log")
		c.inst = append(c.inst, in)
	}
	t.Cleanup(func() {
		for _, in := range c.inst {
			in.kill()
		}
		if t.Failed() {
			for _, in := range c.inst {
				b, _ := os.ReadFile(in.logf)
				t.Logf("== %s's log (last 6 KiB)\n%s", in.id, tail(string(b), 8<<10))
			}
		}
	})
	// One at a time: the first runs the migrations, under an advisory lock
	// the others would wait on anyway.
	for _, in := range c.inst {
		in.start()
	}
	c.startProxy(hp)
	for _, in := range c.inst {
		c.waitBalanced(in, true)
	}
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// start runs the instance and waits until it answers /readyz directly.
func (in *instance) start() {
	t := in.c.t
	t.Helper()
	logf, err := os.OpenFile(in.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "\n== start %s\n", time.Now().Format(time.RFC3339Nano))
	in.cmd = exec.Command(tabbridgeBinary(t), "serve",
		"--listen", in.addr,
		"--public-url", in.c.URL,
		"--database-url", in.c.pg,
		"--data-dir", filepath.Join(in.c.dir, in.id),
		"--jwt-key", "e2e-cluster-signing-key-0123456789abcdef",
		"--extension-ids", ExtensionID,
		"--instance-id", in.id,
		"--internal-address", in.internal,
		"--heartbeat", clusterHeartbeat.String(),
		"--dead-after", clusterDeadAfter.String(),
		"--log-level", logLevel())
	in.cmd.Env = append(os.Environ(), "TABBRIDGE_TEST_POSTGRES=")
	in.cmd.Stdout, in.cmd.Stderr = logf, logf
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	in.exited = make(chan struct{})
	cmd, exited := in.cmd, in.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	testutil.Eventually(t, testutil.WaitLong, func() bool {
		select {
		case <-exited:
			b, _ := os.ReadFile(in.logf)
			t.Fatalf("%s exited while starting:\n%s", in.id, tail(string(b), 4<<10))
		default:
		}
		resp, err := http.Get("http://" + in.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, in.id+" ready")
}

// logLevel is the instances' log level: debug with TABBRIDGE_TEST_LOG set.
func logLevel() string {
	if os.Getenv("TABBRIDGE_TEST_LOG") != "" {
		return "debug"
	}
	return "info"
}

// kill ends the instance with SIGKILL: nothing of it runs after, no
// shutdown, its registry row left to go stale.
func (in *instance) kill() {
	if in.cmd == nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGKILL)
	<-in.exited
	in.cmd = nil
}

// stop ends the instance with SIGTERM, as a rolling restart does, and waits
// for its graceful shutdown.
func (in *instance) stop() {
	t := in.c.t
	t.Helper()
	if in.cmd == nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(binWait):
		_ = in.cmd.Process.Kill()
		<-in.exited
		t.Errorf("%s did not stop on SIGTERM", in.id)
	}
	in.cmd = nil
}

// startProxy writes haproxy's configuration and runs it in the foreground.
func (c *cluster) startProxy(bin string) {
	t := c.t
	t.Helper()
	cfg := filepath.Join(c.dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(c.proxyConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy refuses its configuration: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(c.dir, "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.proxy = exec.Command(bin, "-db", "-f", cfg)
	c.proxy.Stdout, c.proxy.Stderr = logf, logf
	if err := c.proxy.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	t.Cleanup(func() {
		_ = c.proxy.Process.Signal(syscall.SIGKILL)
		_ = c.proxy.Wait()
	})
}

// proxyConfig is haproxy's configuration: README.md's (round-robin request
// by request over every instance, the health check on /readyz, WebSockets
// tunnelled, a refused request retried on another instance, the client's
// address forwarded, events sent at once), checking each instance every
// 100 ms instead of every second, with the test's pin, which picks the
// instance by name.
func (c *cluster) proxyConfig() string {
	backends := make([][2]string, len(c.inst))
	for i, in := range c.inst {
		backends[i] = [2]string{in.id, in.addr}
	}
	return haproxyConfig(c.t, "bind "+c.proxyAddr, backends, "100ms", pinHeader, pinCookie)
}

// waitBalanced waits until haproxy sends a request pinned to the instance
// there (up), or no longer does (down: haproxy ignores a pin to a server it
// took down and balances the request among the others).
func (c *cluster) waitBalanced(in *instance, up bool) {
	c.t.Helper()
	testutil.Eventually(c.t, testutil.WaitLong, func() bool {
		req, _ := http.NewRequest("GET", c.URL+"/readyz", nil)
		req.Header.Set(pinHeader, in.id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			Instance string `json:"instance"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return (resp.StatusCode == http.StatusOK && out.Instance == in.id) == up
	}, fmt.Sprintf("haproxy sees %s up=%v", in.id, up))
}

// byID is the instance with that id.
func (c *cluster) byID(id string) *instance {
	for _, in := range c.inst {
		if in.id == id {
			return in
		}
	}
	c.t.Fatalf("no instance %q", id)
	return nil
}

// other returns an instance that is not one of not.
func (c *cluster) other(not ...*instance) *instance {
	for _, in := range c.inst {
		taken := false
		for _, n := range not {
			taken = taken || n == in
		}
		if !taken {
			return in
		}
	}
	c.t.Fatal("no instance left")
	return nil
}

// holder is the instance that holds a browser's or daemon's socket, as the
// registry's instance_links say; "" while none does.
func (c *cluster) holder(kind, linkID string) string {
	var id string
	err := c.db.QueryRow(`SELECT instance_id FROM instance_links WHERE kind = $1 AND link_id = $2 ORDER BY since DESC LIMIT 1`, kind, linkID).Scan(&id)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		c.t.Fatalf("read instance_links: %v", err)
	}
	return id
}

// waitHolder waits until some instance other than not holds the link, and
// returns it.
func (c *cluster) waitHolder(kind, linkID string, not ...string) *instance {
	c.t.Helper()
	var got string
	testutil.Eventually(c.t, testutil.WaitLong, func() bool {
		got = c.holder(kind, linkID)
		for _, n := range not {
			if got == n {
				return false
			}
		}
		return got != ""
	}, fmt.Sprintf("an instance (not %v) holds %s %s", not, kind, linkID))
	return c.byID(got)
}

// env is the cluster as the shared harness sees one server: haproxy's URL.
func (c *cluster) env() *servertest.Env { return &servertest.Env{URL: c.URL} }

// pinned returns a client of the person's sign-in whose requests haproxy
// sends to in.
func (c *cluster) pinned(person *servertest.Client, in *instance) *servertest.Client {
	other := c.env().NewClient(c.t)
	for _, name := range []string{"tb_access", "tb_refresh", "tb_csrf"} {
		other.SetCookie(name, person.Cookie(name))
	}
	other.CSRF = person.CSRF
	other.SetCookie(pinCookie, in.id)
	return other
}

// headerTransport adds headers to every request.
type headerTransport struct {
	h    http.Header
	base http.RoundTripper
}

func (p headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range p.h {
		r.Header[k] = v
	}
	return p.base.RoundTrip(r)
}

// agent connects the go-sdk MCP client through haproxy with an agent
// token; pinned to in when in is not nil, round-robin otherwise.
func (c *cluster) agent(t testing.TB, token string, in *instance) *mcp.ClientSession {
	t.Helper()
	cs, err := c.connectAgent(token, in)
	if err != nil {
		t.Fatalf("mcp connect through haproxy: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectAgent is agent without the test: the caller closes the session.
func (c *cluster) connectAgent(token string, in *instance) (*mcp.ClientSession, error) {
	h := http.Header{"Authorization": {"Bearer " + token}}
	if in != nil {
		h.Set(pinHeader, in.id)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "tabbridge-cluster-test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: c.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{h, http.DefaultTransport}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Connect(ctx, transport, nil)
}

// events is a person's live event stream at one instance: each data line
// with the time it arrived.
type events struct {
	mu    sync.Mutex
	lines []eventLine
	more  chan struct{}
}

type eventLine struct {
	at   time.Time
	data string
}

// stream opens the person's event stream pinned to in.
func (c *cluster) stream(t testing.TB, person *servertest.Client, in *instance) *events {
	t.Helper()
	return openEvents(t, c.URL, c.pinned(person, in).HTTP.Jar, nil)
}

// openEvents opens the live event stream at base (a server's or a proxy's
// address) of the person whose sign-in cookies jar holds, through rt (nil:
// Go's default transport), until the test ends.
func openEvents(t testing.TB, base string, jar http.CookieJar, rt http.RoundTripper) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/events", nil)
	resp, err := (&http.Client{Jar: jar, Transport: rt}).Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("event stream at %s: %v %v", base, err, resp)
	}
	e := &events{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			e.mu.Lock()
			e.lines = append(e.lines, eventLine{time.Now(), line})
			e.mu.Unlock()
			select {
			case e.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return e
}

// wait waits until found holds of the events so far, in the order they
// arrived; what names the wait in its failure.
func (e *events) wait(t testing.TB, what string, found func(lines []eventLine) bool) {
	t.Helper()
	deadline := time.After(testutil.WaitMedium)
	for {
		e.mu.Lock()
		lines := slices.Clone(e.lines)
		e.mu.Unlock()
		if found(lines) {
			return
		}
		select {
		case <-e.more:
		case <-deadline:
			data := make([]string, len(lines))
			for i, l := range lines {
				data[i] = l.data
			}
			t.Fatalf("%s: not among the %d events that arrived: %q", what, len(lines), data)
		}
	}
}

// until waits until ok holds of the data of every event so far, in the
// order they arrived: a test can tell a state that came back from one that
// never left.
func (e *events) until(t testing.TB, what string, ok func(data []string) bool) {
	t.Helper()
	e.wait(t, what, func(lines []eventLine) bool {
		data := make([]string, len(lines))
		for i, l := range lines {
			data[i] = l.data
		}
		return ok(data)
	})
}

// when waits until an event containing s has arrived and returns when it did.
func (e *events) when(t testing.TB, s string) time.Time {
	t.Helper()
	var at time.Time
	e.wait(t, fmt.Sprintf("no event containing %q arrived", s), func(lines []eventLine) bool {
		for _, l := range lines {
			if strings.Contains(l.data, s) {
				at = l.at
				return true
			}
		}
		return false
	})
	return at
}
