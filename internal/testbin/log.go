package testbin

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// Log collects what a process writes (as its Stdout and Stderr) and lets a
// test wait for a line to appear, without polling: each write wakes the
// waiter.
type Log struct {
	mu      sync.Mutex
	buf     bytes.Buffer  // guarded by mu
	changed chan struct{} // capacity 1: a write since the waiter last looked
}

// NewLog returns an empty Log.
func NewLog() *Log { return &Log{changed: make(chan struct{}, 1)} }

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// WaitFor waits until the log holds s, failing t after within, or as soon as
// exited is closed without it (the process ended; nil when there is no
// process to watch).
func (l *Log) WaitFor(t testing.TB, s string, exited <-chan struct{}, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.changed:
		case <-exited:
			if !strings.Contains(l.String(), s) {
				t.Fatalf("the process exited without saying %q:\n%s", s, l.String())
			}
		case <-timeout:
			t.Fatalf("the process never said %q:\n%s", s, l.String())
		}
	}
}
