package live

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
)

func TestFanOutReachesOnlyThatPerson(t *testing.T) {
	h := New(8)
	a1, cancelA1 := h.Subscribe("alice")
	defer cancelA1()
	a2, cancelA2 := h.Subscribe("alice")
	defer cancelA2()
	b, cancelB := h.Subscribe("bob")
	defer cancelB()

	h.Publish("alice", Event{Type: "task.created", Data: 1})
	for _, ch := range []<-chan Event{a1, a2} {
		if e := testutil.RequireReceive(t, testutil.WaitShort, ch); e.Type != "task.created" || e.Data != 1 {
			t.Fatalf("got %+v", e)
		}
	}
	select {
	case e := <-b:
		t.Fatalf("bob received alice's event %+v", e)
	default:
	}
}

func TestEventsKeepTheirOrder(t *testing.T) {
	h := New(16)
	ch, cancel := h.Subscribe("alice")
	defer cancel()
	for i := range 10 {
		h.Publish("alice", Event{Type: "n", Data: i})
	}
	for i := range 10 {
		if e := testutil.RequireReceive(t, testutil.WaitShort, ch); e.Data != i {
			t.Fatalf("event %d has data %v", i, e.Data)
		}
	}
}

// TestSlowSubscriberIsDroppedWithoutBlocking fills one subscriber's buffer and
// checks that publishing goes on at once for everyone else, and that the slow
// one learns it was dropped by its channel closing after the buffered events.
func TestSlowSubscriberIsDroppedWithoutBlocking(t *testing.T) {
	h := New(2)
	slow, cancelSlow := h.Subscribe("alice")
	defer cancelSlow()
	fast, cancelFast := h.Subscribe("alice")
	defer cancelFast()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5 {
			h.Publish("alice", Event{Type: "n", Data: i})
			if e := testutil.RequireReceive(t, testutil.WaitShort, fast); e.Data != i {
				t.Errorf("fast subscriber got %v, want %d", e.Data, i)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publisher blocked on a slow subscriber")
	}
	var got []any
	for e := range slow {
		got = append(got, e.Data)
	}
	if fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("slow subscriber got %v before being dropped, want [0 1]", got)
	}
	if n := h.Subscribers("alice"); n != 1 {
		t.Fatalf("%d subscribers left, want 1 (the fast one)", n)
	}
}

func TestCancelClosesAndForgets(t *testing.T) {
	h := New(4)
	ch, cancel := h.Subscribe("alice")
	cancel()
	cancel() // twice is fine
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after cancel")
	}
	h.Publish("alice", Event{Type: "after"}) // must not panic on a closed channel
	if n := h.Subscribers("alice"); n != 0 {
		t.Fatalf("%d subscribers after cancel", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) != 0 {
		t.Fatalf("hub still holds %d people", len(h.subs))
	}
}

// TestConcurrentPublishAndCancel runs publishers against subscribers that
// come and go (run with -race): no panic, no leak, no deadlock.
func TestConcurrentPublishAndCancel(t *testing.T) {
	h := New(4)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					h.Publish("alice", Event{Type: "x"})
				}
			}
		})
	}
	for range 200 {
		ch, cancel := h.Subscribe("alice")
		select {
		case <-ch:
		default:
		}
		cancel()
	}
	close(stop)
	wg.Wait()
	if n := h.Subscribers("alice"); n != 0 {
		t.Fatalf("%d subscribers leaked", n)
	}
}

// TestMarksTellAStreamWhatItMissed: a mark taken before a person's event is
// missed, one taken after is not, another person's events do not count, and
// a mark this hub never gave (another instance's, a restart's, garbage)
// always counts as missed.
func TestMarksTellAStreamWhatItMissed(t *testing.T) {
	h := New(8)
	before := h.Mark("alice")
	if h.Missed("alice", before) {
		t.Fatal("a mark with nothing published since counts as missed")
	}
	h.Publish("bob", Event{Type: "task.created"})
	if h.Missed("alice", before) {
		t.Fatal("bob's event counts as missed by alice's page")
	}
	h.Publish("alice", Event{Type: "approval.created"}) // nobody subscribed: still marked
	if !h.Missed("alice", before) {
		t.Fatal("alice's event published after the mark is not missed")
	}
	after := h.Mark("alice")
	if h.Missed("alice", after) {
		t.Fatal("a mark taken after the event counts it as missed")
	}
	other := New(8)
	for _, mark := range []string{other.Mark("alice"), "", "x", before[:len(before)-2] + ".z", "." + after} {
		if !h.Missed("alice", mark) {
			t.Fatalf("mark %q this hub never gave counts as not missed", mark)
		}
	}
}

// TestAPersonsStreamsAreBounded: opening one stream more than MaxStreams
// drops the person's oldest, as a slow one is dropped; the others, and
// other people's, stay.
func TestAPersonsStreamsAreBounded(t *testing.T) {
	h := New(4)
	var chans []<-chan Event
	for range MaxStreams + 1 {
		ch, cancel := h.Subscribe("alice")
		defer cancel()
		chans = append(chans, ch)
	}
	bob, cancel := h.Subscribe("bob")
	defer cancel()
	if _, ok := <-chans[0]; ok {
		t.Fatal("the oldest stream is still open")
	}
	if n := h.Subscribers("alice"); n != MaxStreams {
		t.Fatalf("alice has %d streams, want %d", n, MaxStreams)
	}
	h.Publish("alice", Event{Type: "x"})
	h.Publish("bob", Event{Type: "y"})
	for i, ch := range chans[1:] {
		if e, ok := <-ch; !ok || e.Type != "x" {
			t.Fatalf("stream %d: %+v %v", i+1, e, ok)
		}
	}
	if e := <-bob; e.Type != "y" {
		t.Fatalf("bob: %+v", e)
	}
}
