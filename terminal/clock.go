package terminal

import "time"

// Clock makes timers. The Coalescer takes one so tests can drive windows
// without sleeping.
type Clock interface {
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the Coalescer uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
