package terminal

import "time"

// Clock makes timers and tells the time. The Coalescer takes one so tests
// can drive windows and the echo window without sleeping.
type Clock interface {
	NewTimer(d time.Duration) Timer
	Now() time.Time
}

// Timer is the part of *time.Timer the Coalescer uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }
func (systemClock) Now() time.Time                 { return time.Now() }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
