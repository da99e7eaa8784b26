package relay

import (
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// TestViewerQueueIsSizedByTime: a viewer that keeps up is never given a
// redraw however many bytes wait for it (up to the memory cap); one whose
// oldest output has waited longer than ViewerLag is, at the next batch or
// the next send, and only it.
func TestViewerQueueIsSizedByTime(t *testing.T) {
	h := New(Options{ViewerLag: time.Second})
	fast := &viewer{hub: h, wake: make(chan struct{}, 1)}
	slow := &viewer{hub: h, wake: make(chan struct{}, 1)}
	batch := make([]byte, 512<<10) // 2 MiB in four batches: eight times the old byte queue
	for i := range 4 {
		o := wire.Output{Offset: int64(i * len(batch)), Data: batch}
		if fast.offer(o) || slow.offer(o) {
			t.Fatalf("batch %d: a fresh queue of %d bytes asked for a redraw", i, (i+1)*len(batch))
		}
	}
	slow.mu.Lock()
	for i := range slow.pendingAt {
		slow.pendingAt[i] = slow.pendingAt[i].Add(-2 * time.Second)
	}
	slow.mu.Unlock()
	o := wire.Output{Offset: int64(4 * len(batch)), Data: []byte("x")}
	if fast.offer(o) {
		t.Fatal("the viewer that keeps up was given a redraw")
	}
	if !slow.offer(o) {
		t.Fatal("output waited 2 s for a viewer with a 1 s lag, and it was not replaced by a redraw")
	}
	// Waiting output that ages without new batches is dropped at send time.
	late := &viewer{hub: h, wake: make(chan struct{}, 1)}
	late.offer(wire.Output{Data: []byte("old")})
	late.pendingAt[0] = late.pendingAt[0].Add(-2 * time.Second)
	if _, frame, resync, _ := late.nextFrame(); !resync || frame != nil {
		t.Fatalf("stale output was sent (%q) instead of a redraw", frame)
	}
	if _, frame, _, _ := fast.nextFrame(); frame == nil {
		t.Fatal("the viewer that keeps up was sent nothing")
	}
}
