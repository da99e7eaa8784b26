package server

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
)

// The garbage collector settings `tabbridge serve` ships (its --gc-percent,
// --gc-headroom and --memory-limit defaults), measured on the call path:
// the MCP SDK allocates about 350 KB of short-lived buffers per call (a JSON
// decoder with a 32 KiB buffer for each message it decodes), so with Go's
// default of 100 the collector took about a quarter of each call's CPU. A
// higher percentage lets the heap grow further between collections; the
// memory limit bounds what that costs, the collector working harder as the
// heap nears it. See docs/BENCHMARKS.md, "Call path at the floor".
//
// The percentage is a most: what the heap may grow by between collections
// is DefaultGCHeadroom, but never less than Go's default (100 %) of the
// heap in use nor more than DefaultGCPercent of it (TuneGC). A server with
// a small heap (few browsers) gets the full percentage on its call path; a
// server holding thousands of idle browsers (a live heap of 150 MB and more)
// collects as Go does by default, so its resident memory is not five times
// what it holds: the runtime returns freed memory to the system only above
// its heap goal, which the percentage multiplies.
const (
	DefaultGCPercent   = 400
	DefaultGCHeadroom  = 64 << 20 // bytes
	DefaultMemoryLimit = 1 << 30  // bytes
)

// gcFloorPercent is the least TuneGC sets: Go's own default.
const gcFloorPercent = 100

// TuneGC sets the collector's percentage after every collection to
// headroom over the heap then in use, within [100, most], until the
// returned stop is called (which leaves the last percentage in force).
// most must be at least 100 and headroom positive.
func TuneGC(most int, headroom int64) (stop func()) {
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var mu sync.Mutex
	return tuneGC(most, headroom, func() int64 {
		mu.Lock()
		defer mu.Unlock()
		rtmetrics.Read(sample)
		if sample[0].Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		return int64(sample[0].Value.Uint64())
	})
}

// tuneGC is TuneGC reading the heap in use from live.
func tuneGC(most int, headroom int64, live func() int64) (stop func()) {
	t := &gcTuner{most: most, headroom: headroom, live: live}
	t.set(t.percentFor(t.live()))
	t.arm()
	return func() { t.stopped.Store(true) }
}

// gcTuner re-arms itself with a cleanup on a fresh object each cycle: the
// runtime runs the cleanup once a collection has found the object dead.
type gcTuner struct {
	most     int          // static
	headroom int64        // static
	live     func() int64 // the heap in use, in bytes; static
	stopped  atomic.Bool

	mu sync.Mutex // orders the settings of concurrent cleanups
}

// gcSentinel holds a pointer so it is never packed with other small objects
// (whose liveness would keep its cleanup from running).
type gcSentinel struct {
	p *int
	_ [8]byte
}

func (t *gcTuner) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) { t.tick() }, t)
}

func (t *gcTuner) tick() {
	if t.stopped.Load() {
		return
	}
	t.set(t.percentFor(t.live()))
	t.arm()
}

// percentFor is the percentage that lets a heap of live bytes grow by the
// headroom, within [100, most].
func (t *gcTuner) percentFor(live int64) int {
	if live <= 0 || t.headroom/live >= int64(t.most) {
		return t.most
	}
	return min(t.most, max(gcFloorPercent, int(t.headroom*100/live)))
}

// set sets p every time, not only when it changed: an earlier setting
// changed by someone else is then put right at the next collection.
func (t *gcTuner) set(p int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	debug.SetGCPercent(p)
}
