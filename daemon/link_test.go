package daemon_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/memnet"
	"github.com/tabbridge/tabbridge/internal/testutil"
)

// TestFlappingLinkBacksOff: a server that accepts the socket and closes it
// at once is redialled with a growing wait, not every MinBackoff forever.
// It runs in a synctest bubble over an in-memory pipe, so the waits are the
// real defaults (1 s doubling to 30 s) on the bubble's clock, measured
// exactly.
func TestFlappingLinkBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dials := make(chan time.Time, 64)
		ln := memnet.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			dials <- time.Now()
			conn.Close()
		})}
		go srv.Serve(ln)
		defer srv.Close()
		d, err := daemon.New(daemon.Options{Server: "http://tabbridge.test", Token: "tbm_test", Dial: ln.Dial})
		if err != nil {
			t.Fatal(err)
		}
		defer serving(d)()
		// Waits 1, 2, 4, 8, 16, then 30, 30 s.
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
		last := testutil.RequireReceive(t, testutil.WaitLong, dials)
		for i, gap := range want {
			at := testutil.RequireReceive(t, testutil.WaitLong, dials)
			if got := at.Sub(last); got != gap {
				t.Fatalf("dial %d followed the one before by %v, want %v", i+2, got, gap)
			}
			last = at
		}
	})
}

// TestWrongServerURLIsNamed: a URL where no Tabbridge server answers the
// daemon's socket (a 404) is logged with the status and a hint to check it.
func TestWrongServerURLIsNamed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	logged := make(chan string, 16)
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		select {
		case logged <- string(p):
		default:
		}
		return len(p), nil
	}), nil))
	d, err := daemon.New(daemon.Options{Server: srv.URL, Token: "tbm_test", MinBackoff: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer serving(d)()
	select {
	case line := <-logged:
		if !strings.Contains(line, "404 Not Found") || !strings.Contains(line, "is --server the Tabbridge server's public URL?") {
			t.Fatalf("a 404 was logged as %s", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("nothing logged")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// serving runs d's link until the returned stop, which also closes d.
func serving(d *daemon.Daemon) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	return func() { cancel(); <-served; d.Close(context.Background()) }
}
