package e2e

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// testClock is a server clock a test can move forward (to expire access tokens).
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// liveServer is the real server in process on a loopback port that survives a restart: stop it
// and serve again on the same address and database, as a redeploy does.
type liveServer struct {
	t     testing.TB
	addr  string
	opts  server.Options
	clock *testClock
	env   *servertest.Env
	done  chan struct{}
}

// startLive starts the server on a fresh SQLite database, trusting the real extension's id;
// tweak, if given, adjusts the options first.
func startLive(t testing.TB, tweak ...func(*server.Options)) *liveServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &liveServer{t: t, addr: ln.Addr().String(), clock: &testClock{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("TABBRIDGE_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s.opts = server.Options{
		PublicURL:             "http://" + s.addr,
		DB:                    storetest.Open(t, storetest.SQLite),
		Key:                   []byte("e2e-signing-key-0123456789abcdef!"),
		ExtensionIDs:          []string{ExtensionID},
		Logger:                logger,
		AuthAttemptsPerMinute: 10000,
		Now:                   s.clock.Now,
	}
	for _, f := range tweak {
		f(&s.opts)
	}
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *liveServer) serve(ln net.Listener) {
	s.t.Helper()
	srv, err := server.New(s.opts)
	if err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	s.done = done
	s.env = &servertest.Env{URL: "http://" + s.addr, DB: s.opts.DB, Server: srv, Opts: s.opts}
}

// stop shuts the server down and waits for it; safe to call twice.
func (s *liveServer) stop() {
	if s.done == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.env.Server.Shutdown(ctx)
	<-s.done
	s.done = nil
}

// restart stops the server and starts a new one on the same address and database.
func (s *liveServer) restart() {
	s.t.Helper()
	s.stop()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}
