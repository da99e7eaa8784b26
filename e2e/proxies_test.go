package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// The reverse proxies README.md tells people to put in front of the server
// (Caddy and nginx for one instance, haproxy for several), each run from the
// README's own configuration with TLS for the README's host name, changing
// only the addresses and the certificate's files, so what the README says is
// what is tested.

// readmeHost is the host name the README's configurations serve.
const readmeHost = "tabbridge.example.com"

// siteCert is a certificate authority of the test's own and a certificate
// it signed for readmeHost, in PEM files where the proxies read them.
type siteCert struct {
	roots           *x509.CertPool
	cert, key, both string // the certificate, its key, and both in one file (haproxy's)
}

func makeSiteCert(t testing.TB, dir string) siteCert {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Tabbridge test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: readmeHost}, DNSNames: []string{readmeHost},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	c := siteCert{roots: x509.NewCertPool(), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), both: filepath.Join(dir, "both.pem")}
	c.roots.AddCert(caCert)
	writeFile(t, c.cert, string(certPEM))
	writeFile(t, c.key, string(keyPEM))
	writeFile(t, c.both, string(certPEM)+string(keyPEM))
	return c
}

// toolPath finds a program scripts/test installs. Missing, the test is
// skipped, unless CI is set: there it fails.
func toolPath(t testing.TB, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/" + name); err == nil { // /usr/sbin is on root's PATH only
		return "/usr/sbin/" + name
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found: scripts/test installs it (apt-get install -y %s)", name, pkg)
	}
	t.Skipf("%s not found (apt-get install -y %s); skipped outside CI", name, pkg)
	return ""
}

// readmeBlock is the first fenced code block of README.md holding marker.
func readmeBlock(t testing.TB, marker string) string {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "```")
	for i := 1; i < len(parts); i += 2 { // inside the fences
		_, body, _ := strings.Cut(parts[i], "\n") // past the info string
		if strings.Contains(body, marker) {
			return body
		}
	}
	t.Fatalf("README.md has no code block holding %q", marker)
	return ""
}

// rewrite replaces each old with its new in s, failing when the README no
// longer holds old: the test must notice the README changing under it.
func rewrite(t testing.TB, s string, oldNew ...string) string {
	t.Helper()
	for i := 0; i < len(oldNew); i += 2 {
		if !strings.Contains(s, oldNew[i]) {
			t.Fatalf("README.md's configuration no longer holds %q:\n%s", oldNew[i], s)
		}
		s = strings.ReplaceAll(s, oldNew[i], oldNew[i+1])
	}
	return s
}

// dropLines removes the lines whose first word is one of words.
func dropLines(s string, words ...string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) > 0 && slices.Contains(words, f[0]) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// haproxyConfig is README.md's haproxy configuration with its bind line
// replaced by bind, balancing backends (name → address), with each server's
// health checked every interval. pin, if not empty, names the header and
// cookie a test sets to send a request to one server by name.
func haproxyConfig(t testing.TB, bind string, backends [][2]string, interval, pinHeader, pinCookie string) string {
	t.Helper()
	cfg := readmeBlock(t, "frontend tabbridge")
	cfg = rewrite(t, cfg, "bind :443 ssl crt /etc/haproxy/tabbridge.pem", bind,
		"default-server inter 1s ", "default-server inter "+interval+" ")
	var b strings.Builder
	b.WriteString("global\n  maxconn 4096\n\n")
	b.WriteString(strings.TrimRight(dropLines(cfg, "server"), "\n") + "\n")
	if pinHeader != "" {
		for _, s := range backends {
			fmt.Fprintf(&b, "  use-server %s if { req.hdr(%s) -m str %s } || { req.cook(%s) -m str %s }\n", s[0], pinHeader, s[0], pinCookie, s[0])
		}
	}
	for _, s := range backends {
		fmt.Fprintf(&b, "  server %s %s check\n", s[0], s[1])
	}
	return b.String()
}

// proxy is a reverse proxy run from README.md's configuration in front of
// one server.
type proxy struct {
	name string
	// start runs the proxy on front (127.0.0.1:port) with TLS for readmeHost
	// in front of upstream (host:port), with its files in dir, returning the
	// command to run.
	start func(t testing.TB, dir, front, upstream string, c siteCert) *exec.Cmd
	// stop ends it: nginx's master takes its workers with it on SIGTERM
	// (on SIGKILL they stay, holding the port); Caddy on SIGTERM waits for
	// its open connections to end.
	stop syscall.Signal
}

var proxies = []proxy{
	{"caddy", func(t testing.TB, dir, front, upstream string, c siteCert) *exec.Cmd {
		_, port, _ := net.SplitHostPort(front)
		_, httpPort, _ := net.SplitHostPort(freeAddr(t))
		cfg := rewrite(t, readmeBlock(t, "reverse_proxy"), readmeHost+" {", readmeHost+" {\n\ttls "+c.cert+" "+c.key,
			"reverse_proxy 127.0.0.1:8080", "reverse_proxy "+upstream)
		file := filepath.Join(dir, "Caddyfile")
		writeFile(t, file, fmt.Sprintf("{\n\tadmin off\n\thttp_port %s\n\thttps_port %s\n\tauto_https disable_redirects\n}\n\n%s", httpPort, port, cfg))
		cmd := exec.Command(toolPath(t, "caddy", "caddy"), "run", "--config", file, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		return cmd
	}, syscall.SIGKILL},
	{"nginx", func(t testing.TB, dir, front, upstream string, c siteCert) *exec.Cmd {
		server, httpBlock, ok := strings.Cut(readmeBlock(t, "proxy_pass"), "# in the http block:")
		if !ok {
			t.Fatal(`README.md's nginx configuration no longer says what goes "# in the http block:"`)
		}
		server = rewrite(t, server, "listen 443 ssl;", "listen "+front+" ssl;",
			"/etc/letsencrypt/live/"+readmeHost+"/fullchain.pem", c.cert, "/etc/letsencrypt/live/"+readmeHost+"/privkey.pem", c.key,
			"proxy_pass http://127.0.0.1:8080;", "proxy_pass http://"+upstream+";")
		var temps strings.Builder
		for _, kind := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
			fmt.Fprintf(&temps, "  %s_temp_path %s;\n", kind, filepath.Join(dir, kind))
		}
		user := ""
		if os.Getuid() == 0 {
			user = "user root;\n" // its workers read the certificate where the test wrote it
		}
		file := filepath.Join(dir, "nginx.conf")
		writeFile(t, file, fmt.Sprintf("%sdaemon off;\nworker_processes 1;\npid %s;\nerror_log %s;\nevents {}\nhttp {\n  access_log off;\n%s%s\n%s\n}\n",
			user, filepath.Join(dir, "nginx.pid"), filepath.Join(dir, "error.log"), temps.String(), httpBlock, server))
		return exec.Command(toolPath(t, "nginx", "nginx-light"), "-p", dir, "-c", file, "-e", filepath.Join(dir, "error.log"))
	}, syscall.SIGTERM},
	{"haproxy", func(t testing.TB, dir, front, upstream string, c siteCert) *exec.Cmd {
		file := filepath.Join(dir, "haproxy.cfg")
		writeFile(t, file, haproxyConfig(t, "bind "+front+" ssl crt "+c.both, [][2]string{{"web-1", upstream}}, "1s", "", ""))
		return exec.Command(toolPath(t, "haproxy", "haproxy"), "-db", "-f", file)
	}, syscall.SIGKILL},
}

func writeFile(t testing.TB, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// proxied is a test server behind p at https://readmeHost:port: the server
// trusts the proxy's address (127.0.0.1) to name its clients, and the
// clients reach the server only through the proxy, trusting the test's
// certificate authority.
type proxied struct {
	*servertest.Env // URL is the proxy's; Transport reaches it
	front           string
	roots           *x509.CertPool
}

func startProxied(t testing.TB, p proxy, tweak func(*server.Options)) *proxied {
	t.Helper()
	front := freeAddr(t)
	_, port, _ := net.SplitHostPort(front)
	public := "https://" + readmeHost + ":" + port
	direct := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.PublicURL = public
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		if tweak != nil {
			tweak(o)
		}
	})
	dir := t.TempDir()
	cert := makeSiteCert(t, dir)
	cmd := p.start(t, dir, front, strings.TrimPrefix(direct.URL, "http://"), cert)
	log := newProcLog()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 5 * time.Second // nginx's workers outlive a killed master and hold its output open
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(p.stop)
		select {
		case <-exited:
		case <-time.After(testutil.WaitShort):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("== %s's output\n%s%s", p.name, tail(log.String(), 4<<10), tail(string(errLog), 4<<10))
		}
	})
	px := &proxied{front: front, roots: cert.roots}
	px.Env = &servertest.Env{URL: public, DB: direct.DB, Server: direct.Server, Opts: direct.Opts, Transport: px.transport("")}
	health := &http.Client{Transport: px.Transport, Timeout: testutil.WaitShort}
	testutil.Eventually(t, testutil.WaitMedium, func() bool {
		select {
		case <-exited:
			t.Fatalf("%s exited while starting:\n%s", p.name, tail(log.String(), 4<<10))
		default:
		}
		resp, err := health.Get(public + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, p.name+" passes /healthz through to the server")
	return px
}

// dial reaches the proxy whatever address is asked for (readmeHost has no
// DNS here), from the loopback address local ("" for any).
func (px *proxied) dial(local string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, px.front)
	}
}

// transport is an HTTP client's way to the proxy from local, over TLS
// trusting the test's authority, HTTP/2 where the proxy offers it.
func (px *proxied) transport(local string) *http.Transport {
	return &http.Transport{DialContext: px.dial(local), TLSClientConfig: &tls.Config{RootCAs: px.roots}, ForceAttemptHTTP2: true}
}

// from makes c's requests leave from the loopback address local, so the
// proxy sees a client of that address.
func (px *proxied) from(c *servertest.Client, local string) *servertest.Client {
	c.HTTP.Transport = px.transport(local)
	return c
}

// TestREADMEProxies runs each reverse proxy README.md documents, from its
// configuration there, and checks what the README says it must do:
//
//   - name each client by its own address: one guesser of passwords is
//     stopped while another person behind the same proxy signs in, and a
//     X-Forwarded-For the guesser writes itself changes nothing;
//   - pass the extension's WebSocket;
//   - neither buffer nor cut event streams: a write's approval request
//     reaches the person's live stream, and the MCP progress notifications
//     reach the agent, while the call still waits for the person's answer.
func TestREADMEProxies(t *testing.T) {
	const budget = 4
	for _, p := range proxies {
		t.Run(p.name, func(t *testing.T) {
			env := startProxied(t, p, func(o *server.Options) {
				o.AuthAttemptsPerMinute = budget
				o.ProgressInterval = 50 * time.Millisecond
			})
			alice := "alice@example.com"
			person := env.Person(t, alice) // from 127.0.0.1, a budget of its own

			// Sign-in attempts are counted per client, each behind the proxy.
			guesser := env.from(env.NewClient(t), "127.0.0.5")
			for i := range budget + 1 {
				body := map[string]string{"email": alice, "password": fmt.Sprintf("guess-%d", i)}
				req := fmt.Sprintf("203.0.113.%d", i+1) // a X-Forwarded-For of the guesser's own
				code := signinWith(t, guesser, body, req)
				if i < budget && code != http.StatusUnauthorized {
					t.Fatalf("guess %d through %s answered %d, want 401", i+1, p.name, code)
				}
				if i == budget && code != http.StatusTooManyRequests {
					t.Fatalf("guess %d through %s, past the budget of %d, answered %d: the guesser's own X-Forwarded-For gave it a new budget", i+1, p.name, budget, code)
				}
			}
			other := env.from(env.NewClient(t), "127.0.0.6")
			if code := signinWith(t, other, map[string]string{"email": alice, "password": "password-" + alice}, ""); code != http.StatusOK {
				t.Fatalf("another person behind %s signing in got %d after the guesser's attempts, want 200: the server saw one client for everybody", p.name, code)
			}

			// The extension's WebSocket, and a shared site's tools.
			ws := person.Workspace("Shopping")
			token := person.AgentToken(ws, "laptop")
			person.MustJSON("POST", "/api/sites", map[string]string{"origin": proxiedShop, "workspaceId": ws}, 201, nil)
			var task struct {
				Task struct{ ID string } `json:"task"`
			}
			person.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "Buy tea"}, 201, &task)
			br := env.browser(t, person)
			if m, err := br.Announce(bridgetest.Doc{ID: "d1", Origin: proxiedShop, URL: proxiedShop + "/", Title: "Shop", TabID: 7,
				LastUsed: time.Now(), Tools: proxiedShopTools}, testutil.WaitShort); err != nil || m.Type != "tools.accepted" {
				t.Fatalf("announce through %s: %+v %v", p.name, m, err)
			}

			// A write waits for the person; both streams flow meanwhile.
			events := openEvents(t, env.URL, person.HTTP.Jar, env.Transport)
			progressed := make(chan struct{}, 1)
			agent := env.MCP(t, token, &servertest.MCPOptions{OnProgress: func(*mcp.ProgressNotificationClientRequest) {
				select {
				case progressed <- struct{}{}:
				default:
				}
			}})
			params := &mcp.CallToolParams{Name: "callSiteTool", Arguments: map[string]any{"site": proxiedShop, "tool": "buy",
				"taskId": task.Task.ID, "arguments": map[string]any{"item": "tea"}}}
			params.SetProgressToken("p-1")
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitLong)
				defer cancel()
				res, err := agent.CallTool(ctx, params)
				if err != nil {
					res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
				}
				done <- res
			}()
			events.when(t, `"buy"`)
			select {
			case <-progressed:
			case res := <-done:
				t.Fatalf("the call ended before anyone answered: %s", servertest.ResultText(res))
			case <-time.After(testutil.WaitMedium):
				t.Fatalf("no progress notification reached the agent through %s while its call waited", p.name)
			}
			var pending struct {
				Approvals []struct{ ID string } `json:"approvals"`
			}
			person.MustJSON("GET", "/api/approvals", nil, 200, &pending)
			if len(pending.Approvals) != 1 {
				t.Fatalf("%d requests waiting, want 1", len(pending.Approvals))
			}
			person.MustJSON("POST", "/api/approvals/"+pending.Approvals[0].ID+"/answer", map[string]string{"answer": "once"}, 200, nil)
			m, err := br.Expect("call", testutil.WaitShort)
			if err != nil {
				t.Fatalf("the allowed call never reached the browser through %s: %v", p.name, err)
			}
			br.Result(m.ID, "bought")
			select {
			case res := <-done:
				if res.IsError || !strings.Contains(servertest.ResultText(res), "bought") {
					t.Fatalf("the call through %s answered %q", p.name, servertest.ResultText(res))
				}
			case <-time.After(testutil.WaitMedium):
				t.Fatalf("the agent never read the page's answer through %s", p.name)
			}
		})
	}
}

const proxiedShop = "https://shop.example"

const proxiedShopTools = `[{"name":"buy","description":"Buy an item","inputSchema":{"type":"object","properties":{"item":{"type":"string"}},"required":["item"]}}]`

// signinWith posts a sign-in as c, with xff (if not empty) as the request's
// own X-Forwarded-For, and returns the status.
func signinWith(t testing.TB, c *servertest.Client, body map[string]string, xff string) int {
	t.Helper()
	if xff == "" {
		code, _ := c.Do("POST", "/api/auth/signin", body)
		return code
	}
	base := c.HTTP.Transport
	c.HTTP.Transport = headerTransport{http.Header{"X-Forwarded-For": {xff}}, base}
	defer func() { c.HTTP.Transport = base }()
	code, _ := c.Do("POST", "/api/auth/signin", body)
	return code
}

// browser dials the extension's socket through the proxy for person, as
// the extension does, and reads its welcome and approval count.
func (px *proxied) browser(t testing.TB, person *servertest.Client) *bridgetest.Browser {
	t.Helper()
	var out struct {
		Ticket string `json:"ticket"`
	}
	person.MustJSON("POST", "/api/tickets", nil, 201, &out)
	d := &websocket.Dialer{NetDialContext: px.dial(""), TLSClientConfig: &tls.Config{RootCAs: px.roots}, HandshakeTimeout: testutil.WaitShort}
	b, resp, err := bridgetest.DialWith(context.Background(), d, px.URL, out.Ticket, bridgetest.Origin(servertest.ExtensionID))
	if err != nil {
		t.Fatalf("the extension's socket through the proxy: %v (%v)", err, resp)
	}
	t.Cleanup(func() { b.Conn.Close() })
	if _, err := b.Hello("browser-one", "Chrome", "1.2.3", testutil.WaitShort); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if _, err := b.Expect("approvals", testutil.WaitShort); err != nil {
		t.Fatalf("after the welcome: %v", err)
	}
	return b
}

// BenchmarkEventsThroughProxies reports how long a change takes to reach the
// person's live event stream (p50, p99, from the request that makes it) with
// each proxy README.md documents in front of the server, beside the server
// reached directly in the same run.
//
//	go test ./e2e -run XXX -bench EventsThroughProxies -benchtime 100x
func BenchmarkEventsThroughProxies(b *testing.B) {
	run := func(b *testing.B, env *servertest.Env) {
		person := env.Person(b, "ada@example.com")
		var m struct {
			Machine struct{ ID string } `json:"machine"`
		}
		person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &m)
		events := openEvents(b, env.URL, person.HTTP.Jar, env.Transport)
		lags := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			name := fmt.Sprintf("laptop-%05d", i)
			start := time.Now()
			person.MustJSON("PATCH", "/api/machines/"+m.Machine.ID, map[string]string{"name": name}, 200, nil)
			lags = append(lags, events.when(b, `"`+name+`"`).Sub(start))
		}
		b.StopTimer()
		testutil.ReportLatency(b, lags)
	}
	b.Run("direct", func(b *testing.B) { run(b, servertest.Start(b, storetest.SQLite, nil)) })
	for _, p := range proxies {
		b.Run(p.name, func(b *testing.B) { run(b, startProxied(b, p, nil).Env) })
	}
}
