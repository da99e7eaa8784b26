package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
)

// DefaultExtensionID is the id of the extension in this repository (its
// manifest key fixes it), trusted unless --extension-ids says otherwise.
const DefaultExtensionID = "lknealedcnkkiahlealamioaolnbckeb"

// serveConfig is the server's configuration as read from flags and environment.
type serveConfig struct {
	listen       string
	publicURL    string
	databaseURL  string
	dataDir      string
	jwtKey       string
	extensionIDs string
	anyExtension bool
	openSignup   bool
	logLevel     string
	shutdownWait time.Duration
	approvalWait time.Duration
	goneGrace    time.Duration
	auditKeep    retention
	mcpIdle      time.Duration
	oauthAccess  time.Duration
	oauthCIMD    bool
	proxies      []netip.Prefix
	proxiesFlag  string
	gc           gcConfig
	// caps on what one agent token or one person's browsers can hold (issue 11; docs/DECISIONS.md)
	mcpSessions     int
	pendingMax      int
	pendingBytes    int
	tasksOpen       int
	documentsMax    int
	toolBytesMax    int
	browserCallsMax int
	caps            server.Caps // what one person or workspace keeps (docs/DECISIONS.md, issue 11)
	// several instances on one database (issue 17; docs/DECISIONS.md)
	instanceID      string
	internalAddress string
	internalListen  string
	heartbeat       time.Duration
	deadAfter       time.Duration
	metricsListen   string
}

func parseServe(args []string, getenv func(string) string, stderr io.Writer) (*serveConfig, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	// A value that does not parse is an error, never the default in silence:
	// TABBRIDGE_OPEN_SIGNUP=yes or TABBRIDGE_APPROVAL_WINDOW=300 must not
	// start a server configured otherwise than its operator meant.
	var envErrs []error
	envBool := func(name string) bool {
		v := getenv(name)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: want true or false", name, v))
		}
		return b
	}
	envBoolDefault := func(name string, def bool) bool {
		if getenv(name) == "" {
			return def
		}
		return envBool(name)
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: want a positive duration with its unit, such as 5m or 90s", name, v))
			return def
		}
		return d
	}
	envInt := func(name string, def int) int {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: want a positive whole number", name, v))
			return def
		}
		return n
	}
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", env("TABBRIDGE_LISTEN", "127.0.0.1:8080"), "address to listen on (TABBRIDGE_LISTEN)")
	fs.StringVar(&c.publicURL, "public-url", env("TABBRIDGE_PUBLIC_URL", ""), "URL people and extensions reach the server at; default http://<listen> (TABBRIDGE_PUBLIC_URL)")
	fs.StringVar(&c.databaseURL, "database-url", env("DATABASE_URL", ""), "PostgreSQL URL; empty uses the embedded SQLite file in the data directory (DATABASE_URL)")
	fs.StringVar(&c.dataDir, "data-dir", env("TABBRIDGE_DATA_DIR", "data"), "directory for the SQLite file and the generated signing key (TABBRIDGE_DATA_DIR)")
	fs.StringVar(&c.jwtKey, "jwt-key", env("TABBRIDGE_JWT_KEY", ""), "key that signs access tokens, at least 32 bytes; generated into <data-dir>/jwt.key when empty (TABBRIDGE_JWT_KEY)")
	fs.StringVar(&c.extensionIDs, "extension-ids", env("TABBRIDGE_EXTENSION_IDS", DefaultExtensionID), "comma-separated Chrome extension ids allowed to connect (TABBRIDGE_EXTENSION_IDS)")
	fs.BoolVar(&c.anyExtension, "dev-any-extension", envBool("TABBRIDGE_DEV_ANY_EXTENSION"), "development only: allow any chrome-extension:// origin (TABBRIDGE_DEV_ANY_EXTENSION)")
	fs.BoolVar(&c.openSignup, "open-signup", envBool("TABBRIDGE_OPEN_SIGNUP"), "let anyone create an account; otherwise only invitations (TABBRIDGE_OPEN_SIGNUP)")
	fs.StringVar(&c.logLevel, "log-level", env("TABBRIDGE_LOG_LEVEL", "info"), "debug, info, warn or error (TABBRIDGE_LOG_LEVEL)")
	fs.DurationVar(&c.shutdownWait, "shutdown-timeout", envDuration("TABBRIDGE_SHUTDOWN_TIMEOUT", 10*time.Second), "how long requests in flight may finish on shutdown (TABBRIDGE_SHUTDOWN_TIMEOUT)")
	fs.DurationVar(&c.approvalWait, "approval-window", envDuration("TABBRIDGE_APPROVAL_WINDOW", 5*time.Minute), "how long a write waits for the person's answer before it is denied as expired (TABBRIDGE_APPROVAL_WINDOW)")
	fs.DurationVar(&c.goneGrace, "approval-grace", envDuration("TABBRIDGE_APPROVAL_GRACE", 30*time.Second), "how long a request stays open after every call waiting on it went away, for a retry of the same call to rejoin it (TABBRIDGE_APPROVAL_GRACE)")
	fs.DurationVar(&c.mcpIdle, "mcp-session-timeout", envDuration("TABBRIDGE_MCP_SESSION_TIMEOUT", time.Hour), "how long an idle MCP session lives (TABBRIDGE_MCP_SESSION_TIMEOUT)")
	fs.DurationVar(&c.oauthAccess, "oauth-access-ttl", envDuration("TABBRIDGE_OAUTH_ACCESS_TTL", 15*time.Minute), "lifetime of the access tokens MCP clients get by signing in with OAuth; they refresh them (TABBRIDGE_OAUTH_ACCESS_TTL)")
	fs.StringVar(&c.proxiesFlag, "trusted-proxies", env("TABBRIDGE_TRUSTED_PROXIES", ""), "addresses or CIDR prefixes of the reverse proxies in front of the server, comma-separated (127.0.0.1 for one on this machine): for their requests the client's address, which the sign-in and registration limits count, is read from X-Forwarded-For (TABBRIDGE_TRUSTED_PROXIES)")
	fs.BoolVar(&c.oauthCIMD, "oauth-metadata-documents", envBoolDefault("TABBRIDGE_OAUTH_METADATA_DOCUMENTS", true), "accept MCP clients identified by a client ID metadata document URL, which the server fetches from the internet; false makes them register instead (TABBRIDGE_OAUTH_METADATA_DOCUMENTS)")
	c.auditKeep = retention(defaultAuditRetention)
	if v := getenv("TABBRIDGE_AUDIT_RETENTION"); v != "" {
		if err := c.auditKeep.Set(v); err != nil {
			envErrs = append(envErrs, fmt.Errorf("TABBRIDGE_AUDIT_RETENTION=%w", err))
		}
	}
	fs.Var(&c.auditKeep, "audit-retention", "how long the audit log keeps an entry: days (90d), a duration (720h), or 0 to keep every entry (TABBRIDGE_AUDIT_RETENTION)")
	checkGC := gcFlags(fs, getenv, &c.gc)
	fs.IntVar(&c.mcpSessions, "mcp-sessions-per-token", envInt("TABBRIDGE_MCP_SESSIONS_PER_TOKEN", server.DefaultMCPSessionsPerToken), "most MCP sessions one agent token holds open (TABBRIDGE_MCP_SESSIONS_PER_TOKEN)")
	fs.IntVar(&c.pendingMax, "approvals-pending-max", envInt("TABBRIDGE_APPROVALS_PENDING_MAX", approvals.DefaultMaxPending), "most requests one workspace has waiting for the person (TABBRIDGE_APPROVALS_PENDING_MAX)")
	fs.IntVar(&c.documentsMax, "open-documents-max", envInt("TABBRIDGE_OPEN_DOCUMENTS_MAX", sitetools.DefaultMaxDocuments), "most open pages with tools one person's browsers hold on this server (TABBRIDGE_OPEN_DOCUMENTS_MAX)")
	fs.IntVar(&c.toolBytesMax, "tool-bytes-max", envInt("TABBRIDGE_TOOL_BYTES_MAX", sitetools.DefaultMaxToolBytes), "most bytes of tool lists those pages hold together (TABBRIDGE_TOOL_BYTES_MAX)")
	fs.IntVar(&c.tasksOpen, "tasks-open-max", envInt("TABBRIDGE_TASKS_OPEN_MAX", server.DefaultTasksOpenMax), "most tasks one workspace has open: not started, ongoing or blocked (TABBRIDGE_TASKS_OPEN_MAX)")
	fs.IntVar(&c.caps.Workspaces, "workspaces-max", envInt("TABBRIDGE_WORKSPACES_MAX", server.DefaultWorkspacesMax), "most workspaces one person has (TABBRIDGE_WORKSPACES_MAX)")
	fs.IntVar(&c.caps.AgentTokens, "agent-tokens-max", envInt("TABBRIDGE_AGENT_TOKENS_MAX", server.DefaultAgentTokensMax), "most agent tokens one workspace has that are not revoked, expired ones included (TABBRIDGE_AGENT_TOKENS_MAX)")
	fs.IntVar(&c.caps.Machines, "machines-max", envInt("TABBRIDGE_MACHINES_MAX", server.DefaultMachinesMax), "most machines one person has that are not revoked (TABBRIDGE_MACHINES_MAX)")
	fs.IntVar(&c.caps.SharedSites, "shared-sites-max", envInt("TABBRIDGE_SHARED_SITES_MAX", server.DefaultSharedSitesMax), "most sites one person shares, over all their workspaces (TABBRIDGE_SHARED_SITES_MAX)")
	fs.IntVar(&c.caps.Invitations, "invitations-max", envInt("TABBRIDGE_INVITATIONS_MAX", server.DefaultInvitationsMax), "most unused invitations one person has, expired ones included (TABBRIDGE_INVITATIONS_MAX)")
	fs.IntVar(&c.pendingBytes, "approvals-pending-bytes", envInt("TABBRIDGE_APPROVALS_PENDING_BYTES", approvals.DefaultMaxPendingBytes), "most bytes of arguments one workspace has waiting for the person (TABBRIDGE_APPROVALS_PENDING_BYTES)")
	fs.IntVar(&c.browserCallsMax, "browser-calls-max", envInt("TABBRIDGE_BROWSER_CALLS_MAX", bridge.DefaultMaxCalls), "most tool calls one browser runs at once (TABBRIDGE_BROWSER_CALLS_MAX)")
	fs.StringVar(&c.instanceID, "instance-id", env("TABBRIDGE_INSTANCE_ID", ""), "this instance's id in the instance registry; a new one each start when empty. Give each instance a fixed id to have a restart clean its previous run's leftovers at once (TABBRIDGE_INSTANCE_ID)")
	fs.StringVar(&c.internalAddress, "internal-address", env("TABBRIDGE_INTERNAL_ADDRESS", ""), "host:port of this instance's internal listener, which the other instances on the database dial to forward calls, MCP sessions and terminals; recorded in the registry. Reachable by the other instances only (TABBRIDGE_INTERNAL_ADDRESS)")
	fs.StringVar(&c.internalListen, "internal-listen", env("TABBRIDGE_INTERNAL_LISTEN", ""), "where the internal listener listens when it differs from --internal-address, e.g. 0.0.0.0:9090 (TABBRIDGE_INTERNAL_LISTEN)")
	fs.DurationVar(&c.heartbeat, "heartbeat", envDuration("TABBRIDGE_HEARTBEAT", cluster.DefaultHeartbeat), "how often this instance renews its heartbeat in the instance registry (TABBRIDGE_HEARTBEAT)")
	fs.DurationVar(&c.deadAfter, "dead-after", envDuration("TABBRIDGE_DEAD_AFTER", cluster.DefaultDeadAfter), "how old an instance's heartbeat may get before the others take it for dead and clean its leftovers; at least twice --heartbeat (TABBRIDGE_DEAD_AFTER)")
	fs.StringVar(&c.metricsListen, "metrics-listen", env("TABBRIDGE_METRICS_LISTEN", ""), "serve Prometheus metrics at /metrics on this address instead of the main one (TABBRIDGE_METRICS_LISTEN)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkGC(); err != nil {
		envErrs = append(envErrs, err)
	}
	if len(envErrs) > 0 {
		return nil, errors.Join(envErrs...)
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"shutdown-timeout", c.shutdownWait}, {"approval-window", c.approvalWait}, {"approval-grace", c.goneGrace}, {"mcp-session-timeout", c.mcpIdle}, {"oauth-access-ttl", c.oauthAccess},
		{"heartbeat", c.heartbeat}, {"dead-after", c.deadAfter}} {
		if d.value <= 0 {
			return nil, fmt.Errorf("--%s %s: want a positive duration", d.flag, d.value)
		}
	}
	for _, n := range []struct {
		flag  string
		value int
	}{{"mcp-sessions-per-token", c.mcpSessions}, {"approvals-pending-max", c.pendingMax}, {"approvals-pending-bytes", c.pendingBytes}, {"tasks-open-max", c.tasksOpen}, {"browser-calls-max", c.browserCallsMax},
		{"open-documents-max", c.documentsMax}, {"tool-bytes-max", c.toolBytesMax},
		{"workspaces-max", c.caps.Workspaces}, {"agent-tokens-max", c.caps.AgentTokens}, {"machines-max", c.caps.Machines},
		{"shared-sites-max", c.caps.SharedSites}, {"invitations-max", c.caps.Invitations}} {
		if n.value <= 0 {
			return nil, fmt.Errorf("--%s %d: want a positive whole number", n.flag, n.value)
		}
	}
	proxies, err := server.ParseTrustedProxies(c.proxiesFlag)
	if err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	c.proxies = proxies
	if c.deadAfter < 2*c.heartbeat {
		return nil, fmt.Errorf("--dead-after %s must be at least twice --heartbeat %s: one late heartbeat must not make an instance dead", c.deadAfter, c.heartbeat)
	}
	if c.publicURL == "" {
		// A listen address with no host (":8080", "0.0.0.0:8080") is not an
		// address a browser can use: the pages' Origin check and the MCP
		// command shown with a new token would name "http://:8080".
		host, port, err := net.SplitHostPort(c.listen)
		if err != nil {
			return nil, fmt.Errorf("--listen %q: want host:port, such as 127.0.0.1:8080", c.listen)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "localhost"
		}
		c.publicURL = "http://" + net.JoinHostPort(host, port)
	}
	return &c, nil
}

func (c *serveConfig) logger(w io.Writer) (*slog.Logger, error) { return newLogger(c.logLevel, w) }

// newLogger is the structured logger of serve and daemon alike, at a level
// named as --log-level takes it.
func newLogger(name string, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(name)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", name)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// signingKey returns the configured key, or the one kept in the data
// directory, generating it on first start.
func (c *serveConfig) signingKey() ([]byte, error) {
	if c.jwtKey != "" {
		if len(c.jwtKey) < 32 {
			return nil, errors.New("TABBRIDGE_JWT_KEY must be at least 32 bytes")
		}
		return []byte(c.jwtKey), nil
	}
	path := filepath.Join(c.dataDir, "jwt.key")
	if b, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(b))
		if len(key) < 32 {
			return nil, fmt.Errorf("%s holds fewer than 32 bytes; delete it to generate a new key", path)
		}
		return []byte(key), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	key := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return c.signingKey() // another instance wrote it first
	}
	if err != nil {
		return nil, fmt.Errorf("write signing key: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(key + "\n"); err != nil {
		return nil, fmt.Errorf("write signing key: %w", err)
	}
	return []byte(key), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	cfg, err := parseServe(args, getenv, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := cfg.logger(stderr)
	if err != nil {
		return err
	}
	defer cfg.gc.apply()()
	key, err := cfg.signingKey()
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, store.Options{DatabaseURL: cfg.databaseURL, DataDir: cfg.dataDir, Logger: log})
	if err != nil {
		return err
	}
	defer db.Close()
	srv, err := server.New(server.Options{
		PublicURL: cfg.publicURL, DB: db, Key: key, Logger: log,
		ExtensionIDs: splitList(cfg.extensionIDs), AnyExtension: cfg.anyExtension, OpenSignup: cfg.openSignup,
		ApprovalWindow: cfg.approvalWait, ApprovalGrace: cfg.goneGrace, AuditRetention: time.Duration(cfg.auditKeep), MCPSessionTimeout: cfg.mcpIdle, OAuthAccessTTL: cfg.oauthAccess,
		OAuthNoMetadataDocuments: !cfg.oauthCIMD, TrustedProxies: cfg.proxies,
		MCPSessionsPerToken: cfg.mcpSessions, ApprovalMaxPending: cfg.pendingMax, ApprovalMaxPendingBytes: cfg.pendingBytes, TasksOpenMax: cfg.tasksOpen,
		OpenDocumentsMax: cfg.documentsMax, ToolBytesMax: cfg.toolBytesMax, Caps: cfg.caps,
		Bridge:     bridge.Options{MaxCalls: cfg.browserCallsMax},
		InstanceID: cfg.instanceID, InternalAddress: cfg.internalAddress, InternalListen: cfg.internalListen, Heartbeat: cfg.heartbeat, DeadAfter: cfg.deadAfter,
		MetricsElsewhere: cfg.metricsListen != "",
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.metricsListen != "" {
		mln, err := net.Listen("tcp", cfg.metricsListen)
		if err != nil {
			return fmt.Errorf("listen for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go msrv.Serve(mln)
		defer msrv.Close()
		log.Info("metrics listening", "addr", mln.Addr().String())
	}
	has, err := db.HasUsers(ctx)
	if err != nil {
		return err
	}
	return serveUntilDone(ctx, srv, ln, log, cfg, db.Postgres, !has, ready)
}

// serveUntilDone serves until ctx ends. On a first start (needsOwner: no
// account yet) it says which address to open to create the owner account:
// the first thing a person who just started the server must do.
func serveUntilDone(ctx context.Context, srv *server.Server, ln net.Listener, log *slog.Logger, cfg *serveConfig, pg, needsOwner bool, ready chan<- string) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	dbKind := "sqlite"
	if pg {
		dbKind = "postgres"
	}
	log.Info("tabbridge listening", "addr", ln.Addr().String(), "public_url", cfg.publicURL, "database", dbKind, "gc", cfg.gc.String(), "instance", srv.Instance())
	if needsOwner {
		log.Info("first start: open "+cfg.publicURL+"/setup to create the owner account", "url", cfg.publicURL+"/setup")
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", cfg.shutdownWait)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	<-errc
	log.Info("stopped")
	return nil
}
