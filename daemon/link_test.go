package daemon_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/daemon"
)

// TestFlappingLinkBacksOff: a server that accepts the socket and closes it
// at once is redialled with a growing wait, not every MinBackoff forever.
func TestFlappingLinkBacksOff(t *testing.T) {
	dials := make(chan time.Time, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		dials <- time.Now()
		conn.Close()
	}))
	defer srv.Close()
	const maxBackoff = 64 * time.Millisecond
	d, err := daemon.New(daemon.Options{Server: srv.URL, Token: "tbm_test", MinBackoff: time.Millisecond, MaxBackoff: maxBackoff})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	defer func() { cancel(); <-served; d.Close(context.Background()) }()
	// Waits 1, 2, 4, … 64 ms: the tenth dial follows the ninth by the most.
	var times []time.Time
	timeout := time.After(30 * time.Second)
	for len(times) < 10 {
		select {
		case at := <-dials:
			times = append(times, at)
		case <-timeout:
			t.Fatalf("only %d dials", len(times))
		}
	}
	if gap := times[9].Sub(times[8]); gap < maxBackoff/2 {
		t.Fatalf("the link that failed at once for the tenth time was redialled after %v, want about %v", gap, maxBackoff)
	}
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
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	defer func() { cancel(); <-served; d.Close(context.Background()) }()
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
