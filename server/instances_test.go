package server_test

import (
	"context"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/live"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// twoInstances starts two servers on one PostgreSQL database, each with its
// own connection pool, as two processes would have (issue 17).
func twoInstances(t testing.TB, tweak func(*server.Options)) (a, b *servertest.Env) {
	t.Helper()
	dbA, dbB := twoPools(t)
	start := func(db *store.DB) *servertest.Env {
		return servertest.Start(t, storetest.SQLite, func(o *server.Options) {
			o.DB = db
			if tweak != nil {
				tweak(o)
			}
		})
	}
	return start(dbA), start(dbB)
}

// twoPools opens two connection pools on one fresh PostgreSQL database, as
// two instances' processes would hold; each closes after the test's servers.
func twoPools(t testing.TB) (a, b *store.DB) {
	t.Helper()
	url := storetest.FreshPostgres(t)
	open := func() *store.DB {
		db, err := store.Open(context.Background(), store.Options{DatabaseURL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() }) // after the server's own cleanup
		return db
	}
	return open(), open()
}

// asOn returns a client of env carrying c's sign-in (the instances share
// the signing key and the database).
func asOn(t testing.TB, env *servertest.Env, c *servertest.Client) *servertest.Client {
	other := env.NewClient(t)
	for _, name := range []string{"tb_access", "tb_refresh", "tb_csrf"} {
		other.SetCookie(name, c.Cookie(name))
	}
	other.CSRF = c.CSRF
	return other
}

func userID(t testing.TB, env *servertest.Env, email string) string {
	u, err := env.Opts.DB.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func nextOf(t testing.TB, events <-chan live.Event, typ string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("event stream dropped")
			}
			if e.Type == typ {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event", typ)
		}
	}
}

// eventsAcross makes n changes through one instance and returns how long
// each took, request included, to be on the person's event stream at the
// other; each must arrive within 5 s.
func eventsAcross(t testing.TB, n int) []time.Duration {
	a, b := twoInstances(t, nil)
	alice := a.Person(t, "alice@example.com")
	ws := alice.Workspace("W")
	events, stop := b.Server.Live().Subscribe(userID(t, a, "alice@example.com"))
	defer stop()
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		alice.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "t"}, 201, nil)
		nextOf(t, events, "task.created")
		lat = append(lat, time.Since(start))
	}
	return lat
}

// TestLiveEventsReachEveryInstance: a change made through one instance is on
// the person's event streams at the other. How fast is
// BenchmarkLiveEventsAcrossInstances's.
func TestLiveEventsReachEveryInstance(t *testing.T) {
	eventsAcross(t, 50)
}

// BenchmarkLiveEventsAcrossInstances: a change made through one instance to
// its event on the other's stream, request included (issue 17's target: p99
// under 100 ms), reported as p50-ms and p99-ms over b.N changes.
func BenchmarkLiveEventsAcrossInstances(b *testing.B) {
	testutil.ReportLatency(b, eventsAcross(b, b.N))
}

// TestRevokedTokenRefusedOnEveryInstance: an agent token revoked on one
// instance stops working on the other at once, not when a cache expires.
func TestRevokedTokenRefusedOnEveryInstance(t *testing.T) {
	a, b := twoInstances(t, nil)
	alice, id, secret := aliceWorld(t, a)
	agentB := b.Agent(t, secret)
	if status, body := agentB.Do("GET", "/api/agent/workspace", nil); status != 200 {
		t.Fatalf("token on B: %d %s", status, body)
	}
	alice.MustJSON("DELETE", "/api/workspaces/"+id.workspace+"/tokens/"+id.token, nil, 204, nil)
	revoked := time.Now()
	for {
		status, _ := agentB.Do("GET", "/api/agent/workspace", nil)
		if status == 401 {
			break
		}
		if time.Since(revoked) > time.Second {
			t.Fatalf("B still accepts the revoked token after 1 s (status %d)", status)
		}
	}
	t.Logf("B refused the token revoked on A after %v", time.Since(revoked))
}

// TestSignOutEndsStreamsOnEveryInstance: signing out through one instance
// closes the sign-in's event stream held by the other.
func TestSignOutEndsStreamsOnEveryInstance(t *testing.T) {
	a, b := twoInstances(t, nil)
	alice := a.Person(t, "alice@example.com")
	onB := asOn(t, b, alice)
	ended := make(chan struct{})
	go func() { onB.Do("GET", "/api/events", nil); close(ended) }()
	uid := userID(t, a, "alice@example.com")
	testutil.Eventually(t, testutil.WaitShort, func() bool { return b.Server.Live().Subscribers(uid) == 1 }, "the condition holds")
	alice.MustJSON("POST", "/api/auth/signout", nil, 200, nil)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream on B outlived the sign-out on A")
	}
}

// TestDeadInstanceLeftoversCleaned: requests and links of an instance whose
// heartbeat went stale are cleaned by a living one (the request says why);
// those of a living instance are left alone.
func TestDeadInstanceLeftoversCleaned(t *testing.T) {
	a, b := twoInstances(t, nil)
	_, id, _ := aliceWorld(t, a)
	uid := userID(t, a, "alice@example.com")
	ctx := context.Background()
	old := store.Now().Add(-time.Hour)
	if err := a.Opts.DB.Create(&cluster.Instance{ID: "ghost", StartedAt: old, HeartbeatAt: old}).Error; err != nil {
		t.Fatal(err)
	}
	if err := a.Opts.DB.Create(&cluster.Link{InstanceID: "ghost", Kind: cluster.LinkBrowser, LinkID: "b-ghost", UserID: uid, Since: old}).Error; err != nil {
		t.Fatal(err)
	}
	request := func(instance string) string {
		r := approvals.Request{ID: store.NewID(), UserID: uid, WorkspaceID: id.workspace, TaskID: id.task, Site: "https://shop.example",
			Tool: "buy", Arguments: "{}", ArgsHash: instance, Status: approvals.StatusPending, Waiters: 1, CreatedAt: store.Now(),
			ExpiresAt: store.Now().Add(time.Minute), InstanceID: instance}
		if err := a.Opts.DB.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	ghosts, living := request("ghost"), request(a.Server.Instance())
	events, stop := a.Server.Live().Subscribe(uid)
	defer stop()
	if err := b.Server.Registry().Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	nextOf(t, events, "browser.disconnected") // from B, through the bus
	var got approvals.Request
	a.Opts.DB.Where("id = ?", ghosts).Take(&got)
	if got.Status != approvals.StatusWithdrawn || got.WithdrawnReason != approvals.WithdrawInstanceLost {
		t.Fatalf("the dead instance's request: %s %q", got.Status, got.WithdrawnReason)
	}
	var alive approvals.Request
	a.Opts.DB.Where("id = ?", living).Take(&alive)
	if got = alive; got.Status != approvals.StatusPending {
		t.Fatalf("the living instance's request: %s %q", got.Status, got.WithdrawnReason)
	}
	var n int64
	a.Opts.DB.Model(&cluster.Instance{}).Where("id = ?", "ghost").Count(&n)
	if n != 0 {
		t.Fatal("the dead instance is still registered")
	}
}

// TestMetricsAndReadiness: /metrics names the instance's gauges, and
// /readyz reports the registry's size once both instances swept.
func TestMetricsAndReadiness(t *testing.T) {
	a, b := twoInstances(t, nil)
	if err := a.Server.Registry().Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, body := a.NewClient(t).Do("GET", "/metrics", nil)
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{"tabbridge_browsers_connected 0", "tabbridge_daemons_connected 0", "tabbridge_mcp_sessions 0",
		"tabbridge_approvals_pending 0", "tabbridge_instances 2", "tabbridge_signal_bus_healthy 1", "tabbridge_signal_lag_seconds_bucket",
		"tabbridge_call_duration_seconds_bucket"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var ready struct {
		Status    string `json:"status"`
		Instance  string `json:"instance"`
		Instances int    `json:"instances"`
	}
	b.NewClient(t).MustJSON("GET", "/readyz", nil, 200, &ready)
	if ready.Status != "ready" || ready.Instance != b.Server.Instance() {
		t.Fatalf("/readyz: %+v", ready)
	}
}

// TestRequestIDs: every answer carries a request id; a well-formed one the
// load balancer set is kept, anything else replaced.
func TestRequestIDs(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	for _, tc := range []struct{ sent, want string }{{"lb-42.a_b", "lb-42.a_b"}, {"", ""}, {"bad id <script>", ""}} {
		req, _ := http.NewRequest("GET", env.URL+"/healthz", nil)
		if tc.sent != "" {
			req.Header["X-Request-Id"] = []string{tc.sent}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-Id")
		if got == "" || (tc.want != "" && got != tc.want) || (tc.want == "" && got == tc.sent) {
			t.Errorf("sent %q, answered %q", tc.sent, got)
		}
	}
}

// TestRefreshOnTwoInstancesAtOnce: a page and its event stream refreshing
// one sign-in at the same moment through different instances is not reuse:
// both get a successor and the sign-in lives.
func TestRefreshOnTwoInstancesAtOnce(t *testing.T) {
	a, b := twoInstances(t, nil)
	alice := a.Person(t, "alice@example.com")
	onB := asOn(t, b, alice)
	statuses := make(chan int, 2)
	for _, c := range []*servertest.Client{alice, onB} {
		go func() { status, _ := c.Do("POST", "/api/auth/refresh", nil); statuses <- status }()
	}
	for range 2 {
		if s := <-statuses; s != 200 {
			t.Fatalf("refresh: %d, want both 200", s)
		}
	}
	for _, c := range []*servertest.Client{alice, onB} {
		c.MustJSON("GET", "/api/auth/me", nil, 200, nil)
		c.MustJSON("POST", "/api/auth/refresh", nil, 200, nil) // each successor rotates on
	}
}

// TestApprovalAcrossInstances: an agent's call waits on instance A; the
// person's second browser, held by B, gets the badge; the person denies on
// B; the call on A ends with the denial.
func TestApprovalAcrossInstances(t *testing.T) {
	dbA, dbB := twoPools(t)
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) { o.DB = dbA }, nil)
	b := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.DB = dbB })
	w.announce(t, "d1", time.Now())
	personB := asOn(t, b, w.person)
	brB, _ := extBrowser(t, b, personB, "browser-two")
	ch, cancel := w.buy("tea")
	defer cancel()
	p := w.pending(t, 1)
	m, err := brB.Expect("approvals", testutil.WaitShort)
	if err != nil || m.Pending != 1 || m.Event != "approval.created" {
		t.Fatalf("badge on the browser held by B: %+v %v", m, err)
	}
	personB.MustJSON("POST", "/api/approvals/"+p[0].ID+"/answer", map[string]string{"answer": "deny"}, 200, nil)
	res := awaitCall(t, ch)
	if text := servertest.ResultText(res); !strings.Contains(strings.ToLower(text), "denied") {
		t.Fatalf("the call on A after the denial on B: %q", text)
	}
}

// TestRevokingOnAnotherInstanceEndsWhatItStarted: the person revokes an
// agent token through one instance while the agent's session, its calls and
// the browser are on another. The instance holding them hears it (the
// signal sign-outs and machine revocations use) and ends the agent's work
// as a revocation on itself does: the search running in the page is
// cancelled there, both calls answer with the revocation's words, the write
// leaves the inbox, and the session closes.
func TestRevokingOnAnotherInstanceEndsWhatItStarted(t *testing.T) {
	dbA, dbB := twoPools(t)
	w := newSiteWorld(t, storetest.SQLite, func(o *server.Options) { o.DB = dbA }, retrying)
	b := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.DB = dbB })
	w.announce(t, "d1", time.Now())
	work := w.startWork(t, w.agent, "coffee", 0)
	asOn(t, b, w.person).MustJSON("DELETE", "/api/workspaces/"+w.ws+"/tokens/"+w.tokenID(t), nil, 204, nil)
	w.endedByRevocation(t, w.env, work)
	if e := w.auditOf(t, "search"); len(e) != 1 || e[0].Outcome != "revoked" {
		t.Fatalf("the search's audit entry: %+v, want the outcome revoked", e)
	}
}
