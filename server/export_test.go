package server

import "time"

// SetEventHeartbeat shortens the event stream's heartbeat for a test and
// returns a function that restores it. Call it before starting servers.
func SetEventHeartbeat(d time.Duration) (restore func()) {
	old := eventHeartbeat
	eventHeartbeat = d
	return func() { eventHeartbeat = old }
}
