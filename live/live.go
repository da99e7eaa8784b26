// Package live fans out events to the pages a person has open: the web app's
// server-sent event streams subscribe per person, and whatever changes that
// person's data publishes to them. It owns the per-person subscriber lists and
// their overflow policy; it knows nothing of HTTP, of what the events mean, or
// of other server instances (events reach only subscribers of this process).
//
// Overflow policy: each subscriber has a bounded buffer. A subscriber whose
// buffer is full when an event arrives is dropped — its channel is closed —
// instead of blocking the publisher or silently losing one event. The page on
// the other end reconnects and re-fetches what it shows, so a dropped stream
// costs one reload of a fragment, never a stale screen.
//
// A person has at most MaxStreams streams open: opening one more drops
// their oldest the same way, so the streams a person (or a stolen sign-in)
// holds, and the work of each event, stay bounded.
//
// Marks close the gap between a page's render and its stream: a page is
// rendered from what the database holds, then opens its stream a moment
// later, and an event published in between would reach neither. The page
// is given the hub's Mark for its person when its request arrives (before
// anything is read for it); its stream, opened with that mark, asks
// Missed and, if so, refreshes once.
package live

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
)

// Event is one thing that changed for a person. Type names it (for example
// "task.updated"); Data is encoded as JSON for the page.
type Event struct {
	Type string
	Data any
}

// DefaultBuffer is the number of undelivered events a subscriber may hold
// before it is dropped as too slow.
const DefaultBuffer = 64

// MaxStreams is the most streams one person has open on one hub: a page
// each for far more tabs of the web app (and popups) than a person keeps
// open. The oldest goes first: a tab left open longest, which reconnects
// if it is still there.
const MaxStreams = 32

// Hub holds every person's subscribers. The zero value is not usable; call New.
type Hub struct {
	buffer int    // static after New
	epoch  string // static after New: tells this hub's marks from another's (an instance, a restart)

	mu   sync.Mutex                          // guards subs, seq and last
	subs map[string]map[*subscriber]struct{} // by user id
	seq  uint64                              // events published, all people
	subN uint64                              // streams opened, all people: their order
	last map[string]uint64                   // by user id: seq of the person's newest event
}

// subscriber is one open stream. Its own lock makes "send or close" atomic, so
// a publisher never sends on a closed channel; sends are non-blocking, so the
// lock is never held while waiting on a reader.
type subscriber struct {
	n      uint64     // static: when it opened, in the hub's order (subN)
	mu     sync.Mutex // guards ch sends/close and closed
	ch     chan Event
	closed bool
}

// New returns a hub whose subscribers buffer up to buffer events each
// (DefaultBuffer when buffer < 1).
func New(buffer int) *Hub {
	if buffer < 1 {
		buffer = DefaultBuffer
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &Hub{buffer: buffer, epoch: hex.EncodeToString(b[:]), subs: map[string]map[*subscriber]struct{}{}, last: map[string]uint64{}}
}

// Mark is where userID's events stand now, as a short token a page carries
// to the stream it opens (see the package doc).
func (h *Hub) Mark(userID string) string {
	h.mu.Lock()
	n := h.last[userID]
	h.mu.Unlock()
	return h.epoch + "." + strconv.FormatUint(n, 10)
}

// Missed reports whether userID was published an event after mark was
// taken. A mark this hub did not give (another instance's, one from before
// a restart, or garbage) counts as missed: the page refreshes once, which
// is never wrong.
func (h *Hub) Missed(userID, mark string) bool {
	epoch, n, ok := strings.Cut(mark, ".")
	if !ok || epoch != h.epoch {
		return true
	}
	at, err := strconv.ParseUint(n, 10, 64)
	if err != nil || strconv.FormatUint(at, 10) != n { // only the spelling Mark gives
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[userID] != at
}

// Subscribe starts receiving userID's events. The channel is closed when
// cancel is called, when the subscriber fell too far behind and was dropped,
// or when the person opened more than MaxStreams and this was their oldest;
// either way the caller should stop reading. cancel is safe to call more than
// once and from any goroutine.
func (h *Hub) Subscribe(userID string) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, h.buffer)}
	h.mu.Lock()
	if h.subs[userID] == nil {
		h.subs[userID] = map[*subscriber]struct{}{}
	}
	var oldest *subscriber
	if len(h.subs[userID]) >= MaxStreams {
		for o := range h.subs[userID] {
			if oldest == nil || o.n < oldest.n {
				oldest = o
			}
		}
		delete(h.subs[userID], oldest)
	}
	h.subN++
	s.n = h.subN
	h.subs[userID][s] = struct{}{}
	h.mu.Unlock()
	if oldest != nil {
		oldest.close()
	}
	return s.ch, func() { h.remove(userID, s); s.close() }
}

// Publish delivers e to every subscriber of userID without waiting: a
// subscriber with a full buffer is dropped (see the package doc).
func (h *Hub) Publish(userID string, e Event) {
	h.mu.Lock()
	h.seq++
	h.last[userID] = h.seq
	targets := make([]*subscriber, 0, len(h.subs[userID]))
	for s := range h.subs[userID] {
		targets = append(targets, s)
	}
	h.mu.Unlock()
	for _, s := range targets {
		if !s.offer(e) {
			h.remove(userID, s)
		}
	}
}

// Subscribers reports how many streams userID has open (for tests and metrics).
func (h *Hub) Subscribers(userID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[userID])
}

func (h *Hub) remove(userID string, s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[userID], s)
	if len(h.subs[userID]) == 0 {
		delete(h.subs, userID)
	}
}

// offer queues e, or closes the subscriber when its buffer is full. It
// reports whether the subscriber is still open.
func (s *subscriber) offer(e Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	select {
	case s.ch <- e:
		return true
	default:
		s.closed = true
		close(s.ch)
		return false
	}
}

func (s *subscriber) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}
