// Package daemontest runs a real terminal daemon against a test server: the
// one harness the server, relay and end-to-end tests share.
package daemontest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
)

// Start runs a daemon for serverURL with a machine token until the test
// ends (stopping its sessions then), and returns once its link is up.
// backoff is its first reconnect delay (the longest is ten times it).
func Start(t testing.TB, serverURL, token string, backoff time.Duration) *daemon.Daemon {
	t.Helper()
	return StartLink(t, serverURL, token, backoff).D
}

// Link is a daemon whose link to the server a test can hold down and let up
// again, so that "the machine is offline" lasts exactly as long as the test
// wants instead of as long as a reconnect delay happens to.
type Link struct {
	D *daemon.Daemon

	t      testing.TB
	up     chan bool
	mu     sync.Mutex
	cancel context.CancelFunc
	served chan error
}

// StartLink is Start, returning the Link.
func StartLink(t testing.TB, serverURL, token string, backoff time.Duration) *Link {
	t.Helper()
	l := &Link{t: t, up: make(chan bool, 16)}
	d, err := daemon.New(daemon.Options{Server: serverURL, Token: token, MinBackoff: backoff,
		MaxBackoff: 10 * backoff, Connected: func(b bool) { l.up <- b }})
	if err != nil {
		t.Fatal(err)
	}
	l.D = d
	t.Cleanup(func() {
		l.Hold()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = d.Close(sctx)
	})
	l.Release()
	return l
}

// Hold takes the link down and keeps it down until Release; sessions run on.
func (l *Link) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.served
	l.cancel = nil
	for len(l.up) > 0 { // Serve has returned: nothing more arrives
		<-l.up
	}
}

// Release lets the daemon dial again and returns once its link is up.
func (l *Link) Release() {
	l.t.Helper()
	l.mu.Lock()
	if l.cancel != nil {
		l.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.served = cancel, make(chan error, 1)
	served := l.served
	l.mu.Unlock()
	go func() { served <- l.D.Serve(ctx) }()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case linked := <-l.up:
			if linked {
				return
			}
		case <-timeout:
			l.t.Fatal("the daemon never connected")
		}
	}
}

// WentDown reports whether the link has gone down since it was released
// (or since the last WentDown): the daemon dials again by itself, so a test
// that must not lose the link asks here.
func (l *Link) WentDown() bool {
	for {
		select {
		case up := <-l.up:
			if !up {
				return true
			}
		default:
			return false
		}
	}
}
