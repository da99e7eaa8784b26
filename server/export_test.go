package server

import (
	"context"
	"testing"
	"time"
)

// SetEventHeartbeat shortens the event stream's heartbeat for a test and
// returns a function that restores it. Call it before starting servers.
func SetEventHeartbeat(d time.Duration) (restore func()) {
	old := eventHeartbeat
	eventHeartbeat = d
	return func() { eventHeartbeat = old }
}

// SetAfterRedeem runs f between each ticket's redeem at a socket's door and
// the socket it opens, and returns a function that removes it. Set it before
// dialling.
func SetAfterRedeem(f func()) (restore func()) {
	afterRedeem = f
	return func() { afterRedeem = nil }
}

// SetAfterDaemonAuth runs f between a daemon's admission and its link's
// registration, and returns a function that removes it.
func SetAfterDaemonAuth(f func(machineID string)) (restore func()) {
	afterDaemonAuth = f
	return func() { afterDaemonAuth = nil }
}

// Waiters reports how many calls wait on an in-flight approval request.
func Waiters(s *Server, requestID string) int { return s.gate.Waiters(requestID) }

// UserIDForTest returns the id of the account with email.
func (s *Server) UserIDForTest(t testing.TB, email string) string {
	u, err := s.opts.DB.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// BrowserLabel is browserLabel, for its table test.
var BrowserLabel = browserLabel

// TuneGCWith is TuneGC reading the heap in use from live.
var TuneGCWith = tuneGC

// SetHoldGoneWatch runs f in every MCP POST's connection watch before it
// reports a hang-up (as a loaded machine delays that goroutine), and returns
// a function that removes it. Set it before starting servers.
func SetHoldGoneWatch(f func()) (restore func()) {
	holdGoneWatch = f
	return func() { holdGoneWatch = nil }
}

// MCPSessionCount is how many MCP sessions s holds.
func MCPSessionCount(s *Server) int { return len(s.liveSessions()) }

// MaxIDBytes is the longest string JSON-RPC id the server takes, as JSON.
const MaxIDBytes = maxIDBytes
