// Package store opens Tabbridge's database and applies its schema: PostgreSQL
// when a URL names one, else an embedded SQLite file in the data directory, so
// one command runs the server on a machine with nothing else installed.
//
// It owns the connection, the migrations run (under a PostgreSQL advisory
// lock, so several instances can start at once), the row types, and the
// owner-scoped queries on accounts, workspaces, agent tokens and tasks. It
// knows nothing of HTTP.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/google/uuid"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/tabbridge/tabbridge/migrations"
)

// ErrNotFound is returned when a row does not exist or does not belong to the
// person or workspace asking: the two are never told apart.
var ErrNotFound = errors.New("store: not found")

// ErrTokenExpired is returned for an agent token past the expiry the person
// gave it.
var ErrTokenExpired = errors.New("store: agent token expired")

// ErrConflict is returned when a write would break a uniqueness rule.
var ErrConflict = errors.New("store: conflict")

// PostgresMaxConns bounds one instance's PostgreSQL connections (kept open
// while idle, up to this many): several instances fit PostgreSQL's default
// of 100.
const PostgresMaxConns = 16

// Options says which database to open.
type Options struct {
	// DatabaseURL names a PostgreSQL database (postgres:// or postgresql://).
	// Empty means the embedded SQLite file in DataDir.
	DatabaseURL string
	// DataDir holds the SQLite file when DatabaseURL is empty.
	DataDir string
	Logger  *slog.Logger
}

// DB is an open, migrated database.
type DB struct {
	*gorm.DB
	// Postgres is true on PostgreSQL, false on the embedded SQLite.
	Postgres bool

	// agents and sites cache the two reads on every agent call (hotTTL).
	agents ttlCache[AgentIdentity]
	sites  ttlCache[[]SharedSite]
	oauth  ttlCache[OAuthAccess] // OAuth access tokens, by hash
	// names holds the audit log's interned strings (auditnames.go).
	names nameCache
	// auditSize caches the audit log's size on SQLite, which reads it page
	// by page (AuditStats).
	auditSize ttlValue[int64]
	hooks     *cacheHooks // the caches' signal hooks; static
	url       string      // the PostgreSQL URL; static
	// direct is the pool without gorm's prepared-statement cache, for
	// transactions (txDirect); static.
	direct *gorm.DB

	audit *auditWriter // group commits of the audit log; static after Open
	// instance is the server instance whose calls this pool begins, recorded
	// on each running call (SetInstance; instances.go).
	instance atomic.Pointer[string]
}

// Open connects and applies every pending migration before returning.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	db, err := connect(opts)
	if err != nil {
		return nil, err
	}
	if err := db.migrate(ctx, opts.Logger); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func connect(opts Options) (*DB, error) {
	cfg := &gorm.Config{
		NowFunc:        Now,
		Logger:         logger.Discard,
		TranslateError: true,
		// Prepared statements are cached per connection: the hot paths (agent
		// authentication, audit) then skip re-parsing their SQL every call.
		PrepareStmt: true,
		// Single-statement writes are atomic by themselves; gorm's implicit
		// BEGIN/COMMIT around each would double their round trips.
		SkipDefaultTransaction: true,
	}
	if isPostgres(opts.DatabaseURL) {
		g, err := gorm.Open(postgres.Open(opts.DatabaseURL), cfg)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		sqlDB, err := g.DB()
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		// database/sql keeps only 2 idle connections by default: under
		// concurrent calls every other query would open (fork) a backend.
		sqlDB.SetMaxOpenConns(PostgresMaxConns)
		sqlDB.SetMaxIdleConns(PostgresMaxConns)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		db := newDB(g, sqlDB, true, opts.DatabaseURL)
		newAuditWriter(db, sqlDB)
		return db, nil
	}
	if opts.DatabaseURL != "" {
		return nil, fmt.Errorf("open database: DATABASE_URL must start with postgres:// or postgresql://, got %q", redact(opts.DatabaseURL))
	}
	return openSQLite(opts.DataDir, cfg)
}

func newDB(g *gorm.DB, sqlDB *sql.DB, pg bool, url string) *DB {
	db := &DB{DB: g, Postgres: pg, url: url, hooks: &cacheHooks{}}
	db.direct = g.Session(&gorm.Session{NewDB: true, Context: context.Background()})
	db.direct.Statement.ConnPool = sqlDB
	db.agents = ttlCache[AgentIdentity]{name: CacheAgents, hooks: db.hooks}
	db.sites = ttlCache[[]SharedSite]{name: CacheSites, hooks: db.hooks}
	db.oauth = ttlCache[OAuthAccess]{name: CacheOAuth, hooks: db.hooks}
	return db
}

func openSQLite(dir string, cfg *gorm.Config) (*DB, error) {
	if dir == "" {
		return nil, errors.New("open sqlite: no data directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	dsn := filepath.Join(dir, "tabbridge.db") +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	g, err := gorm.Open(sqlite.Open(dsn), cfg)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	// One connection: SQLite has one writer anyway, and a single connection
	// turns every would-be SQLITE_BUSY into an orderly wait in database/sql.
	sqlDB.SetMaxOpenConns(1)
	db := newDB(g, sqlDB, false, "")
	newAuditWriter(db, sqlDB)
	return db, nil
}

func (db *DB) migrate(ctx context.Context, log *slog.Logger) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	dialect := goose.DialectSQLite3
	opts := []goose.ProviderOption{goose.WithGoMigrations(compactAuditMigration(db.Postgres))}
	if db.Postgres {
		dialect = goose.DialectPostgres
		// Instances starting together queue on an advisory lock instead of
		// racing to create the same tables.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(dialect, sqlDB, migrations.FS, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range res {
		file := "(in Go)" // a Go migration has no file (00016, the compact audit log)
		if r.Source.Path != "" {
			file = filepath.Base(r.Source.Path)
		}
		log.Info("migration applied", "version", r.Source.Version, "file", file, "took", r.Duration)
	}
	return nil
}

// txDirect runs fn in a transaction on the pool itself, past gorm's
// prepared-statement cache; every transaction of the store runs here. The
// cache holds a statement another goroutine is preparing on the pool before
// it is ready, and whoever asks for it waits holding the cache's read lock,
// which stalls every new statement and then every reader. A transaction
// through the cache asks it for each of its statements while holding its
// connection: on SQLite's one connection the preparation waits for that
// connection, and the transaction for the preparation
// (TestTransactionsMeetStatementsBeingPrepared). The audit writer bypasses
// the cache for the same reason. fn must use only tx: the store's own handle
// would wait for the connection tx holds.
func (db *DB) txDirect(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.direct.WithContext(ctx).Transaction(fn)
}

// Ping reports whether the database answers.
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close writes the audit rows still queued (CompleteAudit), then closes
// every connection.
func (db *DB) Close() error {
	db.audit.close()
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Now is the clock every row uses: UTC, microsecond precision, so times read
// back equal times written on both databases.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// NewID returns a time-ordered id (UUIDv7), so ids sort by creation.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

func redact(url string) string {
	if i := strings.Index(url, "@"); i >= 0 {
		return "…" + url[i:]
	}
	return url
}

// notFound turns gorm's missing-row error into ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return ErrConflict
	}
	return err
}
