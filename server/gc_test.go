package server_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/tabbridge/tabbridge/server"
)

// gcPercent reads the collector's percentage.
func gcPercent() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

// collectUntil runs collections until ok holds (the tuner's cleanup runs
// after the collection that found its object dead), or gives up.
func collectUntil(ok func() bool) bool {
	for i := 0; i < 200 && !ok(); i++ {
		runtime.GC()
	}
	return ok()
}

// TestTuneGC: the percentage lets the heap in use grow by the headroom,
// never below Go's default (100) nor above the most asked for; it is set
// again after collections as the heap in use changes; and it stays as it is
// once tuning stops.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	stop := server.TuneGC(400, 1<<50) // a heap far below the headroom: the most
	if p := gcPercent(); p != 400 {
		t.Fatalf("percent %d with a huge headroom, want the most, 400", p)
	}
	stop()
	stop = server.TuneGC(400, 1) // far above it: Go's default
	if p := gcPercent(); p != 100 {
		t.Fatalf("percent %d with a headroom of one byte, want 100", p)
	}
	stop()

	stop = server.TuneGC(400, 32<<20)
	defer stop()
	runtime.GC()
	small := gcPercent()
	if small <= 100 {
		t.Fatalf("percent %d with a test's heap and 32 MiB of headroom, want above 100", small)
	}
	big := make([]byte, 160<<20) // the heap in use is now five times the headroom
	for i := range big {
		big[i] = 1
	}
	if !collectUntil(func() bool { return gcPercent() == 100 }) {
		t.Fatalf("percent %d with 160 MiB in use and 32 MiB of headroom, want 100", gcPercent())
	}
	runtime.KeepAlive(big)
	big = nil
	if !collectUntil(func() bool { return gcPercent() > 100 }) {
		t.Fatalf("percent %d once the 160 MiB are free, want above 100 again (%d before)", gcPercent(), small)
	}
	stop()
	runtime.GC()
	debug.SetGCPercent(300)
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	if p := gcPercent(); p != 300 {
		t.Fatalf("percent %d after stop, want what was set (300)", p)
	}
}
