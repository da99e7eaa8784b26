package servertest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
)

// Restart stops the server and starts a new one with the same options on
// the same database and address, as a deploy would: long-lived sockets end
// and their clients must reconnect.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(e.URL, "http://")
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the old listener's port is being released
	}
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(e.Opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	e.Server = srv
}
