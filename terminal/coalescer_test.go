package terminal

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock hands out timers that fire only when the test says so.
type fakeClock struct {
	timers chan *fakeTimer // each new timer, for the test to fire
	now    atomic.Int64    // UnixNano, moved by the test
}

func (f *fakeClock) Now() time.Time          { return time.Unix(0, f.now.Load()) }
func (f *fakeClock) advance(d time.Duration) { f.now.Add(int64(d)) }

type fakeTimer struct{ c chan time.Time }

func (f *fakeClock) NewTimer(time.Duration) Timer {
	t := &fakeTimer{c: make(chan time.Time, 1)}
	f.timers <- t
	return t
}
func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool          { return true }
func (t *fakeTimer) fire()               { t.c <- time.Time{} }

// coalescerRig runs a Coalescer on a fake clock and collects its batches.
type coalescerRig struct {
	t       *testing.T
	c       *Coalescer
	clock   *fakeClock
	batches chan Batch
}

func newRig(t *testing.T) *coalescerRig {
	r := &coalescerRig{t: t, clock: &fakeClock{timers: make(chan *fakeTimer, 16)}, batches: make(chan Batch, 16)}
	r.c = NewCoalescer(CoalescerOptions{Clock: r.clock, Emit: func(b Batch) { r.batches <- b }, Queue: -1})
	t.Cleanup(func() { _ = r.c.Close() })
	return r
}

func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	select {
	case v := <-c:
		return v
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}

func (r *coalescerRig) write(s string) {
	if _, err := r.c.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *coalescerRig) expect(offset int64, data string) {
	r.t.Helper()
	b := recv(r.t, r.batches, "batch "+data)
	if b.Offset != offset || string(b.Data) != data {
		r.t.Fatalf("batch %d %q, want %d %q", b.Offset, b.Data, offset, data)
	}
}

// noBatch checks nothing was emitted. The run goroutine accepts a write only
// after handling the one before, so batches those caused are already here.
func (r *coalescerRig) noBatch() {
	r.t.Helper()
	select {
	case b := <-r.batches:
		r.t.Fatalf("unexpected batch %q", b.Data)
	default:
	}
}

func TestCoalescerEchoGoesAtOnce(t *testing.T) {
	r := newRig(t)
	r.write("a")
	r.expect(0, "a")
	timer := recv(t, r.clock.timers, "window timer")
	timer.fire() // a quiet window closes: the next byte goes at once again
	r.write("b")
	r.expect(1, "b")
}

// TestCoalescerSendsEchoAtOnce: output that follows input within
// EchoWindow is not held for the window a spinner keeps open; output after
// it is coalesced again.
func TestCoalescerSendsEchoAtOnce(t *testing.T) {
	r := newRig(t)
	r.clock.advance(time.Hour)
	r.write("spin 1")
	r.expect(0, "spin 1")
	timer := recv(t, r.clock.timers, "window timer")
	r.write("spin 2")
	r.write("\x1b") // accepted once "spin 2" is handled
	r.noBatch()     // held: nobody typed
	r.c.Input()
	r.clock.advance(EchoWindow / 2)
	r.write("[m\r|k") // a CR before the echo must not cut it off
	// No timer fires: everything up to the echo goes out at once, in one
	// batch or two (the ESC may have been handled after Input).
	var got string
	for got != "spin 2\x1b[m\r|k" {
		b := recv(t, r.batches, "echo")
		if b.Offset != int64(6+len(got)) {
			t.Fatalf("batch at %d after %q", b.Offset, got)
		}
		got += string(b.Data)
	}
	r.clock.advance(EchoWindow)
	r.write("spin 3")
	r.write("\x1b")
	r.noBatch() // the echo window is over
	timer.fire()
	r.expect(18, "spin 3")
}

func TestCoalescerGathersWithinWindow(t *testing.T) {
	r := newRig(t)
	r.write("frame 1\r\n")
	r.expect(0, "frame 1\r\n")
	timer := recv(t, r.clock.timers, "window timer")
	r.write("frame 2\r\n")
	r.write("frame 3\r\n")
	r.noBatch()
	timer.fire()
	r.expect(9, "frame 2\r\nframe 3\r\n")
	timer = recv(t, r.clock.timers, "second window")
	timer.fire()
	r.noBatch()
}

func TestCoalescerCutsOnlyAtGround(t *testing.T) {
	r := newRig(t)
	r.write("ok\r\n\x1b[3") // an unfinished CSI
	r.expect(0, "ok\r\n")
	timer := recv(t, r.clock.timers, "window timer")
	r.write("1mred\x1b]0;title")
	timer.fire()
	r.expect(4, "\x1b[31mred")
	// An unfinished sequence waits for its end however many windows pass
	// (a loaded machine may leave the program unscheduled that long).
	for range 20 {
		recv(t, r.clock.timers, "held window").fire()
		r.noBatch()
	}
	r.write("\x07ok")
	recv(t, r.clock.timers, "window").fire()
	r.expect(12, "\x1b]0;title\x07ok")
}

func TestCoalescerSendsANeverEndingStringOnceItIsLarge(t *testing.T) {
	r := &coalescerRig{t: t, clock: &fakeClock{timers: make(chan *fakeTimer, 16)}, batches: make(chan Batch, 16)}
	r.c = NewCoalescer(CoalescerOptions{Clock: r.clock, MaxBatch: 20, Emit: func(b Batch) { r.batches <- b }, Queue: -1})
	t.Cleanup(func() { _ = r.c.Close() })
	r.write("\x1b]0;0123456789") // 15 bytes, no cut point
	recv(t, r.clock.timers, "window").fire()
	r.noBatch()
	r.write("abcdefghij") // now 25: a string that never ends must not grow without bound
	recv(t, r.clock.timers, "window").fire()
	r.expect(0, "\x1b]0;0123456789abcdefghij")
}

func TestCoalescerPrefersWrapEndingCut(t *testing.T) {
	r := newRig(t)
	r.write("x")
	r.expect(0, "x")
	timer := recv(t, r.clock.timers, "window timer")
	r.write("line\r\npartial")
	timer.fire()
	r.expect(1, "line\r\n")
	recv(t, r.clock.timers, "next window").fire()
	r.expect(7, "partial")
}

func TestCoalescerCloseFlushesEverything(t *testing.T) {
	r := newRig(t)
	r.write("done\x1b[")
	r.expect(0, "done")
	_ = r.c.Close()
	r.expect(4, "\x1b[")
}

func TestCoalescerBoundsBatches(t *testing.T) {
	r := &coalescerRig{t: t, clock: &fakeClock{timers: make(chan *fakeTimer, 16)}, batches: make(chan Batch, 16)}
	r.c = NewCoalescer(CoalescerOptions{Clock: r.clock, MaxBatch: 20, Emit: func(b Batch) { r.batches <- b }, Queue: -1})
	t.Cleanup(func() { _ = r.c.Close() })
	r.write("a")
	r.expect(0, "a")
	recv(t, r.clock.timers, "window timer")
	r.write("0123456789\r\n")
	r.noBatch()
	r.write("0123456789\r\nabc") // 27 bytes wait: out at once, up to the cut point
	r.expect(1, "0123456789\r\n0123456789\r\n")
	r.noBatch()
}
