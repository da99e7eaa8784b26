// Package testutil is the one way tests wait: named deadlines for a wait,
// Eventually for a condition with no event to wait on, and RequireReceive for
// a channel. It holds no fixtures and starts nothing; the packages' own
// test helpers (servertest, bridgetest, …) do that.
package testutil

import "time"

// The named waits. Each is a deadline for something that normally takes
// milliseconds, sized for the race detector on a loaded two-core machine: a
// test that reaches one has failed, so a generous value costs nothing when
// the code is right.
const (
	// WaitShort bounds an in-process step: a channel send, a hub's
	// bookkeeping, one request on a loopback server.
	WaitShort = 10 * time.Second
	// WaitMedium bounds a step through a real process or socket chain: a
	// daemon dialling in, a session listed, a browser page loading.
	WaitMedium = 30 * time.Second
	// WaitLong bounds the heaviest steps under -race: a terminal stream
	// through the relay, megabytes of arguments validated.
	WaitLong = 90 * time.Second
	// WaitHuge bounds a step that parses tens of megabytes byte by byte: a
	// terminal fed 40 MiB of hyperlinks took 87 s under -race alone on a
	// quiet machine (11 s without), past WaitLong once CI ran beside it.
	WaitHuge = 5 * time.Minute
)

// IntervalFast is how often Eventually checks its condition.
const IntervalFast = 10 * time.Millisecond
