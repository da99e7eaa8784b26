package testutil

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Eventually(t, WaitShort, func() bool { return n.Add(1) >= 3 }, "never counted to three")
	if n.Load() != 3 {
		t.Fatalf("checked %d times, want 3", n.Load())
	}
}

func TestEventuallyFailsAtTheDeadline(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(ft, 30*time.Millisecond, func() bool { return false }, "never")
	}()
	<-done
	if ft.msg == "" {
		t.Fatal("Eventually returned without failing on a condition that never held")
	}
}

func TestRequireReceiveReturnsTheValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := RequireReceive(t, WaitShort, ch); got != 7 {
		t.Fatalf("got %d", got)
	}
}

func TestRequireReceiveFailsOnAClosedChannel(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	ch := make(chan int)
	close(ch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		RequireReceive(ft, WaitShort, ch)
	}()
	<-done
	if ft.msg == "" {
		t.Fatal("RequireReceive returned a value from a closed channel")
	}
}

// fatalRecorder records a Fatal and ends its goroutine, as testing's does,
// without failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatal(args ...any) { f.msg = "fatal"; runtime.Goexit() }

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = format; runtime.Goexit() }
