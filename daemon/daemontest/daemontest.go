// Package daemontest runs a real terminal daemon against a test server: the
// one harness the server, relay and end-to-end tests share.
package daemontest

import (
	"context"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
)

// Start runs a daemon for serverURL with a machine token until the test
// ends (stopping its sessions then), and returns once its link is up.
// backoff is its first reconnect delay (the longest is ten times it).
func Start(t testing.TB, serverURL, token string, backoff time.Duration) *daemon.Daemon {
	t.Helper()
	up := make(chan bool, 16)
	d, err := daemon.New(daemon.Options{Server: serverURL, Token: token, MinBackoff: backoff,
		MaxBackoff: 10 * backoff, Connected: func(b bool) { up <- b }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-served
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = d.Close(sctx)
	})
	timeout := time.After(30 * time.Second)
	for linked := false; !linked; {
		select {
		case linked = <-up:
		case <-timeout:
			t.Fatal("the daemon never connected")
		}
	}
	return d
}
