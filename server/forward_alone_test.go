package server_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestSignalsSkippedWhileAlone: the only living instance on PostgreSQL
// sends no live event as a NOTIFY; a second instance that starts gets the
// very next event.
func TestSignalsSkippedWhileAlone(t *testing.T) {
	url := storetest.FreshPostgres(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "LISTEN "+cluster.Channel); err != nil {
		t.Fatal(err)
	}
	start := func() *servertest.Env {
		db, err := store.Open(context.Background(), store.Options{DatabaseURL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.DB = db; o.InternalAddress = "127.0.0.1:0" })
	}
	// next returns the topic and sender of the next notification.
	next := func() (from, topic string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitShort)
		defer cancel()
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		parts := strings.SplitN(n.Payload, "\x1f", 3)
		return parts[0], parts[1]
	}
	a := start()
	alice := a.Person(t, "alice@example.com")
	ws := alice.Workspace("W")
	alice.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "t"}, 201, nil)
	// The bus pings itself every second, in order with what it sends: two
	// of A's pings after the task, and no live event between.
	for pings := 0; pings < 2; {
		from, topic := next()
		if topic == "live" {
			t.Fatalf("the only instance sent a live event as a NOTIFY")
		}
		if topic == "_ping" && from == a.Server.Instance() {
			pings++
		}
	}
	b := start()
	events, stop := b.Server.Live().Subscribe(userID(t, a, "alice@example.com"))
	defer stop()
	alice.MustJSON("POST", "/api/workspaces/"+ws+"/tasks", map[string]string{"title": "t2"}, 201, nil)
	nextOf(t, events, "task.created")
}
