// Package storetest gives tests a fresh, migrated database of each kind: the
// embedded SQLite in a temporary directory, and a new database on the
// PostgreSQL server that the test command starts (TABBRIDGE_TEST_POSTGRES
// holds its admin URL). With CI set, a missing PostgreSQL fails the test
// instead of skipping it.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, to create and drop test databases

	"github.com/tabbridge/tabbridge/store"
)

// EnvPostgres names the variable holding the admin URL of the test PostgreSQL.
const EnvPostgres = "TABBRIDGE_TEST_POSTGRES"

// Kind is one of the two databases Tabbridge runs on.
type Kind string

// The kinds every storage test runs on.
const (
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
)

// Each runs fn once on a fresh SQLite database and once on a fresh PostgreSQL
// database, each as its own subtest.
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	for _, k := range []Kind{SQLite, Postgres} {
		t.Run(string(k), func(t *testing.T) { fn(t, Open(t, k)) })
	}
}

// Open returns a fresh, migrated database of the given kind, closed (and on
// PostgreSQL dropped) when the test ends.
func Open(t testing.TB, k Kind) *store.DB {
	t.Helper()
	db, _ := Shared(t, k)
	return db
}

// Shared opens a fresh database of kind k, as Open does, and also returns its
// options, for tests that open more handles on the same database with
// store.Open — each standing for another server instance.
func Shared(t testing.TB, k Kind) (*store.DB, store.Options) {
	t.Helper()
	opts := Options(t, k)
	db, err := store.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("open %s: %v", k, err)
	}
	t.Cleanup(func() { db.Close() })
	return db, opts
}

// Options returns store options for a fresh, empty database of the given kind
// without opening it (for tests that start servers themselves).
func Options(t testing.TB, k Kind) store.Options {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if k == SQLite {
		return store.Options{DataDir: t.TempDir(), Logger: quiet}
	}
	return store.Options{DatabaseURL: FreshPostgres(t), DataDir: t.TempDir(), Logger: quiet}
}

// FreshPostgres creates an empty database on the test PostgreSQL server and
// returns its URL; it is dropped when the test ends.
func FreshPostgres(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvPostgres)
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: the test command must start PostgreSQL (run scripts/test)", EnvPostgres)
		}
		t.Skipf("%s is not set: run scripts/test to include the PostgreSQL tests", EnvPostgres)
	}
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("connect to test postgres: %v", err)
	}
	defer adb.Close()
	name := "tb_" + randomHex()
	if _, err := adb.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, name) })
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvPostgres, err)
	}
	u.Path = "/" + name
	return u.String()
}

func dropDatabase(t testing.TB, admin, name string) {
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		t.Logf("drop test database: %v", err)
		return
	}
	defer adb.Close()
	if _, err := adb.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
		t.Logf("drop test database %s: %v", name, err)
	}
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Kinds runs fn once per database kind, each as its own subtest, for tests
// that open their databases themselves (through a server, say).
func Kinds(t *testing.T, fn func(t *testing.T, k Kind)) {
	t.Helper()
	for _, k := range []Kind{SQLite, Postgres} {
		t.Run(string(k), func(t *testing.T) { fn(t, k) })
	}
}
