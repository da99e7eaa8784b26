// Package server is Tabbridge's HTTP face: the JSON API for people, the agent
// endpoints, sign-in and sessions, and the wiring of the domain packages
// (store, tickets, bridge, sitetools, approvals, live, relay) behind
// Fiber. It owns routes, cookies, CSRF, error shapes and request decoding; the
// domain packages know nothing of HTTP.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/singleflight"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/live"
	"github.com/tabbridge/tabbridge/oauth"
	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/tickets"
)

// Options configures a Server. cmd/tabbridge builds it from flags and the
// environment; New fills the zero values with the documented defaults.
type Options struct {
	// PublicURL is where people reach the server (e.g. https://tabbridge.example).
	// It decides cookie security and the origin that state-changing requests
	// must come from.
	PublicURL string
	DB        *store.DB
	// Key signs access tokens (HMAC-SHA256); at least 32 bytes.
	Key []byte
	// ExtensionIDs are the Chrome extension ids whose origin is trusted.
	ExtensionIDs []string
	// AnyExtension trusts every chrome-extension:// origin (development only).
	AnyExtension bool
	// OpenSignup lets anyone create an account; otherwise only invitations do.
	OpenSignup bool
	Logger     *slog.Logger
	// AccessTTL and RefreshTTL are the sign-in token lifetimes.
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// InvitationTTL is how long an invitation link stays valid.
	InvitationTTL time.Duration
	// TrustedProxies are the reverse proxies in front of the server: for a
	// request from one of them, the client's address (which per-address
	// limits count) is read from X-Forwarded-For (clientaddr.go).
	TrustedProxies []netip.Prefix
	// AuthAttemptsPerMinute limits sign-in, sign-up and setup attempts per
	// client address (default 20).
	AuthAttemptsPerMinute int
	// MCPSessionTimeout ends MCP sessions idle this long (default 1 hour);
	// a client then opens a new session.
	MCPSessionTimeout time.Duration
	// MCPSessionsPerToken caps the MCP sessions one agent token holds open
	// (default DefaultMCPSessionsPerToken); an initialize beyond it is refused.
	MCPSessionsPerToken int
	// TasksOpenMax caps the tasks one workspace has open (not started,
	// ongoing or blocked; default DefaultTasksOpenMax): creating or
	// reopening one beyond it is refused.
	TasksOpenMax int
	// Caps bound the workspaces, agent tokens, machines, shared sites and
	// invitations one person (or workspace) keeps; creating one beyond a
	// cap is refused (409 limit_reached). Zero fields take the defaults.
	Caps Caps
	// OpenDocumentsMax caps the open documents with tools one person's
	// browsers hold on this instance, and ToolBytesMax the bytes of their
	// tool lists together (defaults sitetools.DefaultMaxDocuments and
	// DefaultMaxToolBytes): an announcement beyond either is refused.
	OpenDocumentsMax, ToolBytesMax int
	// CallTimeout bounds a tool call in the browser (default 60 s).
	CallTimeout time.Duration
	// ProgressInterval is the pace of MCP progress notifications while a
	// call waits (default 5 s).
	ProgressInterval time.Duration
	// AuditRetention is how long the audit log keeps an entry; 0 keeps every
	// entry. cmd/ defaults it to 90 days.
	AuditRetention time.Duration
	// AuditPrune paces the deletion of older entries (defaults in
	// fillDefaults).
	AuditPrune AuditPrune
	// ApprovalWindow is how long a request waits for the person (default 5 minutes).
	ApprovalWindow time.Duration
	// ApprovalGrace is how long a request stays open once every call waiting
	// on it went away, for a retry to rejoin (default approvals.DefaultGrace).
	ApprovalGrace time.Duration
	// ApprovalMaxPending and ApprovalMaxPendingBytes limit the requests one
	// workspace has waiting for the person, by count and by bytes of
	// arguments (defaults approvals.DefaultMaxPending, DefaultMaxPendingBytes).
	ApprovalMaxPending      int
	ApprovalMaxPendingBytes int
	// Now is the clock for tokens and tickets; time.Now when nil.
	Now func() time.Time
	// Bridge configures the hub of extension sockets (idle timeout, queue,
	// calls per browser, frame size, close grace); zero values take the
	// bridge's defaults. Its DB, Catalog and OnChange are the server's own,
	// and its Logger defaults to Logger.
	Bridge bridge.Options
	// Relay configures the terminal relay (watermarks, queues, heartbeat).
	Relay relay.Options
	// OAuthAccessTTL is the lifetime of the access tokens MCP clients get
	// through OAuth (default 15 minutes); their refresh tokens live RefreshTTL.
	OAuthAccessTTL time.Duration
	// OAuthMetadata configures fetching client ID metadata documents (tests
	// allow their own server's address); nil is the default protection.
	OAuthMetadata *oauth.FetcherOptions
	// OAuthNoMetadataDocuments turns client ID metadata documents off (for a
	// server without internet access); clients then register dynamically.
	OAuthNoMetadataDocuments bool

	// InstanceID names this instance in the registry; a new id when empty.
	// Restarting with the same id cleans the previous run's leftovers at
	// once (cluster.Options.ID).
	InstanceID string
	// InternalAddress is where other instances reach this one: the internal
	// listener (internal.go) serves there, and the registry records it. A
	// port of 0 takes a free port. Empty on several instances: nothing can
	// be forwarded to this one.
	InternalAddress string
	// InternalListen is where the internal listener listens when it differs
	// from InternalAddress (e.g. 0.0.0.0:9090 behind a container's address).
	InternalListen string
	// Heartbeat and DeadAfter are the registry's periods (defaults
	// cluster.DefaultHeartbeat, cluster.DefaultDeadAfter).
	Heartbeat, DeadAfter time.Duration
	// SingleInstance says no other instance shares the database (always
	// so on SQLite): signals stay in process, the caches are trusted for
	// their TTL whatever the database's state, and a start cleans every
	// other instance's rows.
	SingleInstance bool
	// MetricsElsewhere leaves /metrics off the public routes: cmd serves
	// MetricsHandler on its own address.
	MetricsElsewhere bool
}

// Server holds the Fiber app and the long-lived state behind it.
type Server struct {
	opts    Options    // static after New
	app     *fiber.App // static after New
	tickets *tickets.Issuer
	gate    *approvals.Gate
	catalog *sitetools.Catalog // live and persisted tools of shared sites
	ops     *sitetools.Ops     // listSiteTools, getSiteToolDefinition, callSiteTool
	mcp     *mcp.Server        // set while routes are mounted, then static
	// mcpHTTP is the MCP handler itself, for the sessions of this instance
	// that other instances forward (forward_mcp.go); set with mcp.
	mcpHTTP http.Handler
	// sessions counts each agent token's open MCP sessions; set with mcp.
	sessions *sessionCap
	// mcpPosts counts MCP POST requests in flight (each ends once its answer
	// is written), so shutdown lets them answer before connections close.
	mcpPosts sync.WaitGroup
	// gone tells a waiting call that the client behind its MCP POST went away.
	gone goneWatches
	// posts counts the MCP POSTs in flight per session (revoke.go).
	posts  sessionPosts
	public *url.URL  // parsed PublicURL, static
	live   *live.Hub // per-person events for the web app's streams; static
	pages  *pages    // parsed web app templates; static
	// signins is sign-in family → what it opened, ended with it; machines is
	// machine id → its daemon's socket, ended when it is revoked. Static.
	signins, machines *followers
	// agents is an agent's token or OAuth grant id → its running tool calls
	// and MCP sessions, ended when the person takes its access away
	// (revoke.go). Static.
	agents *followers
	// authLimit is the one per-address budget of sign-in attempts, shared by
	// the API and the pages; set while routes are mounted, then static.
	authLimit fiber.Handler
	hub       *bridge.Hub     // connected browsers; closed when ctx ends
	relay     *relay.Hub      // terminal daemons, sessions and viewers
	oauth     *oauth.Server   // the authorization server for /mcp; static
	resumed   resumedSessions // MCP sessions opened again for ids that outlived theirs

	// ctx ends when Shutdown starts, so long-lived handlers (sockets, event
	// streams, waiting calls) end with a clear status instead of hanging.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts goroutines the server started and must wait for on close.
	wg sync.WaitGroup

	// rotations collapses concurrent refreshes of one refresh token.
	rotations singleflight.Group
	// recent maps a just-rotated refresh token to its rotation (see rotationGrace).
	recent sync.Map

	// id, bus, registry and metrics tie this instance to the others on
	// its database (cluster.go, metrics.go); static after New.
	id       string
	bus      cluster.Bus
	registry *cluster.Registry
	metrics  *metrics
	// in is the internal listener and the client of the other instances'
	// (internal.go); fwd routes calls across instances (forward.go). Static.
	in  *internal
	dir *directory
	// othersAt is the unix nanos of the last signal from another instance
	// (cluster.go, alone).
	othersAt atomic.Int64
	// termFwd tracks viewers forwarded to other instances (terminal_forward.go).
	termFwd termForwards

	shutdownOnce sync.Once
	// listening guards listeners and closed: a Shutdown that comes before Serve (a
	// serve command cancelled while it starts) must still stop it, and Fiber's own
	// shutdown stops only a server that is already running.
	listening sync.Mutex
	listeners []net.Listener
	closed    bool
}

// New builds a Server with its routes.
func New(opts Options) (*Server, error) {
	if err := fillDefaults(&opts); err != nil {
		return nil, err
	}
	pub, err := url.Parse(opts.PublicURL)
	if err != nil || (pub.Scheme != "http" && pub.Scheme != "https") || pub.Host == "" {
		return nil, fmt.Errorf("new server: public URL %q must be an http or https URL", opts.PublicURL)
	}
	// The web app, the extension and the OAuth endpoints live at the root of
	// their host (the pages link /static/…, the extension dials /ws/…): a
	// prefix would leave every page half broken behind the proxy, so it is
	// refused at the start rather than found out in a browser.
	if pub.Path != "" || pub.RawQuery != "" || pub.Fragment != "" || pub.User != nil {
		return nil, fmt.Errorf("new server: public URL %q must be a scheme and host only (like https://tabbridge.example.com): "+
			"Tabbridge is served at the root of its host, so give it a host or subdomain of its own instead of a path", opts.PublicURL)
	}
	if opts.Relay.Logger == nil {
		opts.Relay.Logger = opts.Logger
	}
	s := &Server{opts: opts, public: pub, live: live.New(live.DefaultBuffer), signins: newFollowers(opts.DB.FamilyActive),
		tickets: tickets.New(opts.DB, func() time.Time { return opts.Now().UTC().Truncate(time.Microsecond) })}
	s.machines = newFollowers(opts.DB.MachineActive)
	s.agents = newVouchedFollowers(agentStands(opts.DB))
	s.id = opts.InstanceID
	if s.id == "" {
		s.id = store.NewID()
	}
	s.metrics = newMetrics()
	s.dir = newDirectory()
	s.bus = s.newBus()
	if s.pages, err = loadPages(); err != nil {
		return nil, err
	}
	if s.oauth, err = s.newOAuth(); err != nil {
		return nil, err
	}
	// From here on nothing fails before startCluster, which closes the
	// internal listener if it fails.
	if err := s.listenInternal(); err != nil {
		return nil, err
	}
	s.registry = cluster.New(cluster.Options{DB: opts.DB, ID: s.id, Address: s.opts.InternalAddress, Heartbeat: opts.Heartbeat,
		DeadAfter: opts.DeadAfter, Single: !opts.DB.Postgres || opts.SingleInstance, OnDead: s.onInstanceDead, Logger: opts.Logger})
	s.relay = relay.New(s.relayOptions())
	s.gate = approvals.New(approvals.Options{DB: opts.DB, Window: opts.ApprovalWindow, Grace: opts.ApprovalGrace, Notify: s.onApproval, Logger: opts.Logger,
		MaxPending: opts.ApprovalMaxPending, MaxPendingBytes: opts.ApprovalMaxPendingBytes,
		InstanceID: s.id, Settled: func(id string) { s.signal(topicSettled, []byte(id)) }, Trusted: s.bus.Healthy})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.catalog = sitetools.NewCatalog(opts.DB, opts.DB.Shares)
	s.catalog.SetLimits(sitetools.Limits{Documents: s.opts.OpenDocumentsMax, ToolBytes: s.opts.ToolBytesMax})
	s.startHub()
	s.ops = sitetools.NewOps(sitetools.Options{DB: opts.DB, Catalog: s.catalog, Invoker: forwarder{s}, Gate: s.gate,
		ApprovalWindow: s.gate.Window(), Logger: opts.Logger, CallTimeout: opts.CallTimeout,
		OnCall: func(e *store.AuditEntry) { s.metrics.callFinished(e); s.publish(e.UserID, evCallFinished, e) }})
	// The hub and the gate exist: a dead instance's cleanup can tell screens
	// and browsers.
	s.subscribe()
	if err := s.startCluster(); err != nil {
		s.cancel()
		s.hub.Close()
		if s.in.ln != nil {
			s.in.ln.Close()
		}
		return nil, err
	}
	s.app = fiber.New(fiber.Config{
		AppName: "tabbridge",
		// Immutable: strings from a request (cookies, params) stay valid after
		// it ends; some are kept (rotation cache, hub keys).
		Immutable:             true,
		DisableStartupMessage: true,
		ErrorHandler:          s.handleError,
		BodyLimit:             maxRequestBody,
		ReadTimeout:           30 * time.Second,
		// WriteTimeout stays 0: it would cut event streams and long MCP calls.
		IdleTimeout: 2 * time.Minute,
	})
	s.routes()
	s.internalRoutes()
	s.terminalRoutes()
	s.serveInternal()
	s.registerGauges()
	if s.multi() {
		s.sweepEvery(s.registry.Heartbeat(), "directory of the other instances", s.pruneDirectory)
		s.sweepEvery(time.Minute, "calls left running", s.interruptOrphans)
		s.sweepEvery(time.Minute, "overdue approval requests", func(ctx context.Context) (int64, error) {
			n, err := s.gate.ExpireOverdue(ctx, time.Minute)
			return int64(n), err
		})
	}
	s.sweepEvery(time.Minute, "tickets", s.tickets.Sweep)
	s.sweepEvery(time.Hour, "refresh tokens", s.opts.DB.SweepRefreshTokens) // one row per rotation, about every 15 minutes
	s.sweepEvery(time.Hour, "oauth tokens", s.opts.DB.SweepOAuth)
	if opts.AuditRetention > 0 {
		s.sweepEvery(opts.AuditPrune.Every, "audit log", s.pruneAudit)
	}
	return s, nil
}

// AuditPrune paces audit retention: every Every, the entries older than the
// retention are deleted Batch at a time, Pause apart, so calls writing their
// own rows never wait long behind a deletion (SQLite has one writer).
type AuditPrune struct {
	Every time.Duration // default 10 minutes
	Batch int           // default 200
	Pause time.Duration // default 50 ms
}

// pruneAudit deletes the audit entries older than the retention.
func (s *Server) pruneAudit(ctx context.Context) (int64, error) {
	p := s.opts.AuditPrune
	n, err := s.opts.DB.PruneAudit(ctx, s.opts.Now().Add(-s.opts.AuditRetention), p.Batch, p.Pause)
	if n > 0 {
		s.opts.Logger.Info("deleted audit entries older than the retention", "count", n, "retention", s.opts.AuditRetention)
	}
	return n, err
}

func fillDefaults(o *Options) error {
	if o.DB == nil {
		return errors.New("new server: no database")
	}
	if len(o.Key) < 32 {
		return errors.New("new server: the signing key must be at least 32 bytes")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PublicURL == "" {
		o.PublicURL = "http://localhost:8080"
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	if o.AccessTTL == 0 {
		o.AccessTTL = 15 * time.Minute
	}
	if o.AuditPrune.Every == 0 {
		o.AuditPrune.Every = 10 * time.Minute
	}
	if o.AuditPrune.Batch == 0 {
		o.AuditPrune.Batch = 200
	}
	if o.AuditPrune.Pause == 0 {
		o.AuditPrune.Pause = 50 * time.Millisecond
	}
	if o.RefreshTTL == 0 {
		o.RefreshTTL = 30 * 24 * time.Hour
	}
	if o.InvitationTTL == 0 {
		o.InvitationTTL = 7 * 24 * time.Hour
	}
	if o.AuthAttemptsPerMinute == 0 {
		o.AuthAttemptsPerMinute = 20
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = 5 * time.Second
	}
	if o.MCPSessionsPerToken == 0 {
		o.MCPSessionsPerToken = DefaultMCPSessionsPerToken
	}
	if o.TasksOpenMax == 0 {
		o.TasksOpenMax = DefaultTasksOpenMax
	}
	o.Caps.fillDefaults()
	if o.OpenDocumentsMax == 0 {
		o.OpenDocumentsMax = sitetools.DefaultMaxDocuments
	}
	if o.ToolBytesMax == 0 {
		o.ToolBytesMax = sitetools.DefaultMaxToolBytes
	}
	if o.MCPSessionTimeout == 0 {
		o.MCPSessionTimeout = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Live returns the hub that carries each person's events to their open pages.
func (s *Server) Live() *live.Hub { return s.live }

// App returns the Fiber app, for tests that drive it in memory.
func (s *Server) App() *fiber.App { return s.app }

// Serve answers requests on ln until Shutdown, which closes ln. Called after
// Shutdown, it closes ln and returns ErrServerClosed at once.
func (s *Server) Serve(ln net.Listener) error {
	s.listening.Lock()
	if s.closed {
		s.listening.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners = append(s.listeners, ln)
	s.listening.Unlock()
	err := s.app.Listener(ln)
	s.listening.Lock()
	closed := s.closed
	s.listening.Unlock()
	if closed {
		return nil
	}
	return err
}

// ErrServerClosed is what Serve returns when it is called after Shutdown.
var ErrServerClosed = errors.New("the server was shut down before it started serving")

// Shutdown stops in two steps: first it ends long-lived handlers and stops
// taking connections, letting requests in flight finish until ctx ends; then
// it waits for the server's own goroutines. The caller closes the database.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdownOnce.Do(func() {
		s.cancel()
		s.signal(topicDirGone, nil) // the others stop routing calls here; the browsers here reconnect elsewhere
		s.gate.Close()
		s.endToolCalls(ctx)
		s.relay.Close() // hijacked sockets are not tracked by Fiber
		s.termFwd.wg.Wait()
		s.listening.Lock()
		s.closed = true
		listeners := s.listeners
		s.listening.Unlock()
		err = s.app.ShutdownWithContext(ctx)
		// A Serve that had not yet started its server when Fiber shut down would
		// serve on: closing its listener ends it either way.
		for _, ln := range listeners {
			ln.Close()
		}
		s.closeInternal(ctx)
		s.wg.Wait()
		if rerr := s.registry.Close(ctx); rerr != nil {
			s.opts.Logger.Warn("mark instance stopped", "err", rerr)
		}
		s.bus.Close() // after the gate's last signals are queued: Close sends them

	})
	return err
}

// endToolCalls waits (until ctx ends) for MCP requests to answer — the
// cancelled server context ends waiting tool calls with a clear result — and
// then closes every MCP session, so clients see an orderly end instead of a
// cut stream.
func (s *Server) endToolCalls(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.mcpPosts.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	if s.mcp != nil {
		for ss := range s.mcp.Sessions() {
			ss.Close()
		}
	}
}

// secureCookies reports whether cookies get the Secure flag.
func (s *Server) secureCookies() bool { return s.public.Scheme == "https" }

// publicOrigin is scheme://host[:port] of the public URL.
func (s *Server) publicOrigin() string { return s.public.Scheme + "://" + s.public.Host }

// extensionOrigin reports whether origin is a trusted extension's.
func (s *Server) extensionOrigin(origin string) bool {
	id, ok := strings.CutPrefix(origin, "chrome-extension://")
	if !ok || id == "" {
		return false
	}
	if s.opts.AnyExtension {
		return true
	}
	for _, allowed := range s.opts.ExtensionIDs {
		if id == allowed {
			return true
		}
	}
	return false
}

// sweepEvery runs sweep at start and then every interval until the server
// stops, logging failures.
func (s *Server) sweepEvery(interval time.Duration, what string, sweep func(context.Context) (int64, error)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if _, err := sweep(s.ctx); err != nil && s.ctx.Err() == nil {
				s.opts.Logger.Warn("sweep "+what, "err", err)
			}
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
