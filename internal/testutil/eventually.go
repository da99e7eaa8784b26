package testutil

import (
	"testing"
	"time"
)

// Eventually checks cond every IntervalFast until it holds, and fails the
// test with msg if it does not within wait. It is for state with no event
// to wait on (an HTTP listing, a counter); where a channel or callback says
// when something happened, wait on that with RequireReceive instead.
func Eventually(t testing.TB, wait time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(IntervalFast)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			if !cond() {
				t.Fatalf("%s (not within %s)", msg, wait)
			}
			return
		}
	}
}

// RequireReceive returns the next value from ch, failing the test if none
// arrives within wait or ch is closed.
func RequireReceive[T any](t testing.TB, wait time.Duration, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed before a value arrived")
		}
		return v
	case <-time.After(wait):
		t.Fatalf("nothing received within %s", wait)
	}
	var zero T
	return zero
}
