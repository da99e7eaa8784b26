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
