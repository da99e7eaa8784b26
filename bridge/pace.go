package bridge

import (
	"math"
	"sync"
	"time"
)

// A tools.announce costs the server far more than it costs the browser that
// sends it: up to 1 MiB parsed, 128 schemas compiled, and a database write
// under the catalog's one announcement lock, which every other person's
// announcements queue behind. Read as fast as the socket carries them, one
// socket's flood took half to two-thirds of the machine's two cores, writing
// every list: 3,000 to 6,000 small lists a second, or 20 of the largest
// (docs/DECISIONS.md, BenchmarkAnnounceFlood). A client
// with a ticket also names its own document ids, so a bound per document
// alone would not hold.
//
// So each socket processes announcements at a pace (Options.AnnouncePace):
// a burst at once, as a reconnecting extension announces every open page,
// then so many a second, in number and in bytes of tool lists. One beyond
// it is held, never dropped blindly: at most one per document, since each
// announcement replaces its document's whole list, so a newer one of the
// same document takes the held one's place (keeping its turn) and the one
// replaced is answered superseded. What is held is processed in turn as the
// pace allows, all at once before a call.result (the extension sends a
// page's announcement before its answer, and an agent must never be answered
// on a list older than the page's), and dropped with its document's
// document.gone or the socket's end. The honest extension sends at most one
// announcement of a document per 250 ms, and far fewer a second than the
// pace, so it is never held.

// ErrCodeSuperseded answers an announcement that was held back and then
// replaced by a newer one of the same document (or ended by the document's
// document.gone) before it was processed.
const ErrCodeSuperseded = "superseded"

// Pace bounds what one socket's announcements make the server do: Burst
// announcements and BytesBurst bytes of tool lists at once, then PerSecond
// and BytesPerSecond. An announcement larger than BytesBurst passes on a
// full budget.
type Pace struct {
	PerSecond      float64
	Burst          int
	BytesPerSecond int
	BytesBurst     int
}

// DefaultAnnouncePace is the pace of Options.AnnouncePace by default; the
// numbers and their measurements are in docs/DECISIONS.md.
var DefaultAnnouncePace = Pace{PerSecond: 20, Burst: 128, BytesPerSecond: 1 << 20, BytesBurst: 16 << 20}

func (p *Pace) fillDefaults() {
	d := DefaultAnnouncePace
	if p.PerSecond <= 0 {
		p.PerSecond = d.PerSecond
	}
	if p.Burst <= 0 {
		p.Burst = d.Burst
	}
	if p.BytesPerSecond <= 0 {
		p.BytesPerSecond = d.BytesPerSecond
	}
	if p.BytesBurst <= 0 {
		p.BytesBurst = d.BytesBurst
	}
}

// heldIntake bounds how fast a socket's reader takes announcements while
// it holds some back: then each one read is a flood's, and reading and
// decoding it still costs the server (about 18 ms for the largest). Five
// times the default pace, so what is held is still coalesced; the honest
// extension, never held, never meets it.
var heldIntake = Pace{PerSecond: 100, Burst: 100, BytesPerSecond: 4 << 20, BytesBurst: 4 << 20}

// What one socket holds back at most: while it holds this many documents, or
// this many bytes of their lists, its reader waits (the browser's frames wait
// in the connection) until one is processed.
const (
	maxHeldDocuments = 128
	maxHeldBytes     = 4 << 20
)

// budget is a socket's room under its Pace, counted when last looked at. It
// falls below zero when what was held runs at once before a call.result, so
// that run is paid for before anything else is taken.
type budget struct {
	n, bytes float64
	at       time.Time
}

func (b *budget) refill(p Pace, now time.Time) {
	if b.at.IsZero() {
		b.n, b.bytes = float64(p.Burst), float64(p.BytesBurst)
	} else if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.n = min(b.n+dt*p.PerSecond, float64(p.Burst))
		b.bytes = min(b.bytes+dt*float64(p.BytesPerSecond), float64(p.BytesBurst))
	}
	b.at = now
}

// wait is how long until an announcement of size bytes fits (0: it does).
func (b *budget) wait(p Pace, size int) time.Duration {
	need := max((1-b.n)/p.PerSecond, (costBytes(p, size)-b.bytes)/float64(p.BytesPerSecond))
	if need <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(need * float64(time.Second)))
}

func (b *budget) take(p Pace, size int) {
	b.n--
	b.bytes -= costBytes(p, size)
}

// owed is how long until a budget taken below zero is back at zero.
func (b *budget) owed(p Pace) time.Duration {
	need := max(-b.n/p.PerSecond, -b.bytes/float64(p.BytesPerSecond))
	if need <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(need * float64(time.Second)))
}

func costBytes(p Pace, size int) float64 { return float64(min(size, p.BytesBurst)) }

// pacer is a socket's budget and the announcements it holds back. Guarded by
// mu; handing one to the catalog is serialised by the conn's seq.
type pacer struct {
	mu      sync.Mutex
	budget  budget
	intake  budget              // announcements read while some are held (heldIntake)
	held    map[string]*Inbound // by document id, at most one each
	order   []string            // documents held, oldest first
	bytes   int                 // of the held tool lists
	running bool                // a drain goroutine runs
	closed  bool                // the socket ended: nothing is held or taken any more
	room    chan struct{}       // closed when a held announcement leaves; nil while nobody waits
}

// admission is what pacer.admit decided for an announcement.
type admission struct {
	run      bool            // process it now
	wait     <-chan struct{} // nothing held has room: wait on it and ask again
	replaced *Inbound        // the held announcement of the same document it replaced
	drain    bool            // it is held and no drain runs: start one
	slow     time.Duration   // it is held: read the next frame only after this (heldIntake)
}

func announceSize(in *Inbound) int { return len(in.Announce.Tools) }

func (p *pacer) admit(in *Inbound, pace Pace, now time.Time) admission {
	p.mu.Lock()
	defer p.mu.Unlock()
	size, doc := announceSize(in), in.Announce.DocumentID
	p.budget.refill(pace, now)
	if len(p.order) == 0 && p.budget.wait(pace, size) == 0 {
		p.budget.take(pace, size)
		return admission{run: true}
	}
	old := p.held[doc]
	oldSize := 0
	if old != nil {
		oldSize = announceSize(old)
	}
	if (old == nil && len(p.order) >= maxHeldDocuments) || p.bytes-oldSize+size > maxHeldBytes {
		if p.room == nil {
			p.room = make(chan struct{})
		}
		return admission{wait: p.room}
	}
	if p.held == nil {
		p.held = map[string]*Inbound{}
	}
	if old == nil {
		p.order = append(p.order, doc)
	}
	p.held[doc] = in
	p.bytes += size - oldSize
	p.intake.refill(heldIntake, now)
	p.intake.take(heldIntake, size)
	a := admission{replaced: old, drain: !p.running && !p.closed, slow: p.intake.owed(heldIntake)}
	p.running = p.running || a.drain
	return a
}

// next says how long the oldest held announcement has to wait; ok is false
// when nothing is held (the drain then ends).
func (p *pacer) next(pace Pace, now time.Time) (wait time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.order) == 0 {
		p.running = false
		return 0, false
	}
	p.budget.refill(pace, now)
	return p.budget.wait(pace, announceSize(p.held[p.order[0]])), true
}

// pop takes the oldest held announcement when the pace allows it (or, with
// force, at once, paid for by the budget going below zero).
func (p *pacer) pop(pace Pace, now time.Time, force bool) *Inbound {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.order) == 0 {
		return nil
	}
	p.budget.refill(pace, now)
	in := p.held[p.order[0]]
	if !force && p.budget.wait(pace, announceSize(in)) > 0 {
		return nil
	}
	p.budget.take(pace, announceSize(in))
	p.order = p.order[1:]
	p.removeLocked(in)
	return in
}

// drop removes the held announcement of a document, if any, and returns it.
func (p *pacer) drop(doc string) *Inbound {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.held[doc]
	if in == nil {
		return nil
	}
	for i, d := range p.order {
		if d == doc {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	p.removeLocked(in)
	return in
}

func (p *pacer) removeLocked(in *Inbound) {
	delete(p.held, in.Announce.DocumentID)
	p.bytes -= announceSize(in)
	if len(p.order) == 0 {
		p.order, p.held = nil, nil // a flood's map and slice go with it
	}
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
}

// used folds a document.used into the document's held announcement, which
// the catalog does not know yet and so would not record it.
func (p *pacer) used(doc string, lastUsed int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.held[doc]; in != nil && in.Announce.LastUsed != 0 && (lastUsed == 0 || lastUsed > in.Announce.LastUsed) {
		in.Announce.LastUsed = lastUsed
	}
}

func (p *pacer) holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.order) > 0
}

// close drops everything held: the socket has ended.
func (p *pacer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.held, p.order, p.bytes = nil, nil, 0
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
}

// announce takes a tools.announce on the reader: processed now when the
// socket is within its pace and holds nothing back, else held (answering
// the one it replaces), or, when the socket holds all it may, once there is
// room.
func (c *conn) announce(in *Inbound) {
	if !c.isShared(in.Announce.Origin) {
		c.notShared(in)
		return
	}
	for {
		c.seq.Lock()
		a := c.pace.admit(in, c.h.opts.AnnouncePace, time.Now())
		if a.run {
			c.process(in)
		}
		c.seq.Unlock()
		if a.replaced != nil {
			c.sendError(protoErr(ErrCodeSuperseded, a.replaced.ID, "tools.announce: a newer announcement of document %q arrived before this one was recorded and replaced it; the newest list of a document is the one recorded, and it is answered in its turn.", in.Announce.DocumentID))
		}
		if a.drain {
			c.drains.Add(1)
			go c.drain()
		}
		if a.slow > 0 {
			c.pause(a.slow)
		}
		if a.wait == nil {
			return
		}
		select {
		case <-a.wait:
		case <-c.quit:
			return
		}
	}
}

// pause keeps the reader from the next frame for d, or until the socket ends.
func (c *conn) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.quit:
	}
}

// drain processes what the socket holds back, oldest document first, each
// when the pace allows. It ends when nothing is held, or the socket ends
// (Serve waits for it).
func (c *conn) drain() {
	defer c.drains.Done()
	pace := c.h.opts.AnnouncePace
	for {
		wait, ok := c.pace.next(pace, time.Now())
		if !ok {
			return
		}
		if wait > 0 {
			if c.pause(wait); c.closing() {
				return // stopPace drops what is held
			}
			continue
		}
		c.seq.Lock()
		if in := c.pace.pop(pace, time.Now(), false); in != nil {
			c.processHeld(in)
		}
		c.seq.Unlock()
	}
}

// processHeld is process on the drain's goroutine: a bug there ends only
// this socket (1011), as one in the reader's handling does.
func (c *conn) processHeld(in *Inbound) {
	defer func() {
		if r := recover(); r != nil {
			c.h.opts.Logger.Error("held announcement panicked", "user", c.userID, "browser", c.browserID, "panic", r)
			c.shut(CloseInternal, "internal error")
		}
	}()
	c.process(in)
}

// flushHeld processes everything held at once, whatever the pace: a
// call.result is about to be handled, and the page's announcements sent
// before it must count first. The budget pays for it afterwards.
func (c *conn) flushHeld() {
	c.seq.Lock()
	defer c.seq.Unlock()
	for {
		in := c.pace.pop(c.h.opts.AnnouncePace, time.Now(), true)
		if in == nil {
			return
		}
		c.process(in)
	}
}

// dropHeld forgets the held announcement of a document that went, and
// answers it. Called under seq.
func (c *conn) dropHeld(doc string) {
	if in := c.pace.drop(doc); in != nil {
		c.sendError(protoErr(ErrCodeSuperseded, in.ID, "tools.announce: document %q went away (document.gone) before this announcement was recorded; nothing was kept.", doc))
	}
}

// stopPace ends the socket's announcements: what is held is dropped, and
// once this returns no announcement of the socket reaches the catalog.
func (c *conn) stopPace() {
	c.seq.Lock()
	c.pace.close()
	c.seq.Unlock()
	c.drains.Wait()
}
