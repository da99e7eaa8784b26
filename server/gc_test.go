package server_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
)

// gcPercent reads the collector's percentage (without setting it, which
// would race with the tuner).
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// collectUntil runs collections until ok holds (the tuner's cleanup runs,
// on the runtime's cleanup goroutine, after the collection that found its
// object dead), or gives up after testutil.WaitShort.
func collectUntil(ok func() bool) bool {
	deadline := time.Now().Add(testutil.WaitShort)
	for !ok() && time.Now().Before(deadline) {
		runtime.GC()
		runtime.Gosched() // let the cleanup goroutine run
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

	var live atomic.Int64
	live.Store(8 << 20)
	stop = server.TuneGCWith(400, 64<<20, live.Load)
	defer stop()
	for _, c := range []struct {
		live int64
		want int
	}{{32 << 20, 200}, {1 << 30, 100}, {20 << 20, 320}, {1 << 20, 400}} {
		live.Store(c.live)
		if !collectUntil(func() bool { return gcPercent() == c.want }) {
			t.Fatalf("percent %d with %d MiB in use and 64 MiB of headroom, want %d", gcPercent(), c.live>>20, c.want)
		}
	}
	stop()
	runtime.GC()
	live.Store(32 << 20)
	for i := 0; i < 5; i++ {
		runtime.GC()
	}
	if p := gcPercent(); p != 400 {
		t.Fatalf("percent %d after stop, want the last one set (400)", p)
	}
}
