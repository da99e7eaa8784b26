package bridge

import (
	"errors"
	"sync"
)

// A socket's outbound queue holds three kinds of traffic. Replies and pushes
// (pongs, errors, site lists) are bounded by Options.QueueSize: a browser
// that lets that many pile up is a slow consumer and is closed. The traffic
// the server itself generates for agents' calls — the calls, their
// call.cancel messages, and the approvals count — never counts against it:
// its room is reserved, so a burst of calls that all time out together can
// never close the person's browser (issue 11).
//
// The bound that makes the reservation finite is the in-flight cap
// (Options.MaxCalls): a call holds one of the browser's slots from the
// moment it is queued until its result arrives, or, when it is cancelled,
// until its call.cancel has left the queue. Each slot accounts for at most
// two queued messages (the call and its cancel), so the queue's capacity is
// QueueSize + 2×MaxCalls + 1 (the one coalesced approvals message).

// outKind says which budget a queued message counts against.
type outKind uint8

const (
	outReply     outKind = iota // counts against QueueSize
	outCall                     // a call; its room is its slot
	outCancel                   // a call.cancel; leaving the queue frees its call's slot
	outApprovals                // marker for the coalesced approvals message (conn.approvals)
)

// outbound is one entry of a socket's queue.
type outbound struct {
	data []byte
	kind outKind
}

// outQueue is a socket's outbound queue. Its slice exists only while
// messages wait, so an idle browser holds none (a channel of the full
// capacity cost every browser about 3 KiB: issue 16).
type outQueue struct {
	mu  sync.Mutex
	buf []outbound // guarded by mu
}

// push adds m unless max messages wait already.
func (q *outQueue) push(m outbound, max int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buf) >= max {
		return false
	}
	q.buf = append(q.buf, m)
	return true
}

// pop takes the oldest message, if any.
func (q *outQueue) pop() (outbound, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buf) == 0 {
		return outbound{}, false
	}
	m := q.buf[0]
	q.buf[0] = outbound{}
	if q.buf = q.buf[1:]; len(q.buf) == 0 {
		q.buf = nil
	}
	return m, true
}

func (q *outQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.buf)
}

// queueCapacity is the queue size that holds every budget at once.
func queueCapacity(o Options) int { return o.QueueSize + 2*o.MaxCalls + 1 }

// errClosing is returned by addCall once the socket is closing.
var errClosing = errors.New("bridge: socket closing")

// put hands m to the writer without ever blocking. Only replies can find
// their budget full (a slow consumer); the reserved kinds always find room,
// and a full channel for them would be a bug in the accounting, treated
// like a slow consumer rather than a blocked goroutine.
func (c *conn) put(m outbound) bool {
	if c.closing() {
		return false
	}
	if m.kind == outReply && int(c.replies.Add(1)) > c.h.opts.QueueSize {
		c.replies.Add(-1)
		c.slowConsumer()
		return false
	}
	if c.out.push(m, queueCapacity(c.h.opts)) {
		c.kick()
		return true
	}
	if m.kind == outReply {
		c.replies.Add(-1)
	}
	c.slowConsumer()
	return false
}

// offerError queues an error reply while at most half the reply budget is
// used, and otherwise drops it: for answers the server's own cancels made
// expected, which must leave room for the replies that matter.
func (c *conn) offerError(e *ProtocolError) {
	if c.closing() || 2*int(c.replies.Load()) >= c.h.opts.QueueSize {
		return
	}
	c.sendError(e)
}

func (c *conn) slowConsumer() {
	c.h.opts.Logger.Warn("closing slow consumer", "user", c.userID, "browser", c.browserID, "queued", c.out.len())
	c.shut(ClosePolicy, "slow consumer")
}

// take is the writer's side of put: it settles m's budget as m leaves the
// queue and returns the bytes to write (nil: nothing to write).
func (c *conn) take(m outbound) []byte {
	switch m.kind {
	case outReply:
		c.replies.Add(-1)
	case outCancel:
		c.mu.Lock()
		c.inflight--
		c.mu.Unlock()
	case outApprovals:
		c.mu.Lock()
		a := c.approvals
		c.approvals = nil
		c.mu.Unlock()
		if a == nil {
			return nil
		}
		return encode(a)
	}
	return m.data
}

// pushApprovals queues the approvals message, coalesced: while one is still
// queued, a newer one replaces it in place (it carries the newer count), so
// a burst of requests is one message per write instead of one per request.
func (c *conn) pushApprovals(m ApprovalsMsg) {
	c.mu.Lock()
	queued := c.approvals != nil
	c.approvals = mergeApprovals(c.approvals, m)
	c.mu.Unlock()
	if !queued {
		c.put(outbound{kind: outApprovals})
	}
}

// mergeApprovals folds next into the approvals message still queued. The
// newest count wins; a creation is not lost to a later change of another
// request, since the extension alerts the person only on a creation.
func mergeApprovals(queued *ApprovalsMsg, next ApprovalsMsg) *ApprovalsMsg {
	if queued == nil || queued.Event != EventApprovalCreated || next.Event == EventApprovalCreated {
		return &next
	}
	if queued.Request != nil && next.Request != nil && queued.Request.ID == next.Request.ID {
		return &next // created and settled before anyone was told: nothing to alert
	}
	m := next
	m.Event, m.Request = queued.Event, queued.Request
	return &m
}

// recentIDs is a bounded set of the call ids cancelled last. A page's answer
// can cross its call.cancel on the wire (the extension times a call out at
// the same deadline), so after a burst of cancels comes a burst of such
// answers: each is still answered unknown_call, but only while the reply
// budget has room (offerError) — never a reason to close the browser.
type recentIDs struct {
	set   map[string]struct{}
	order []string // oldest first
}

func (r *recentIDs) add(id string, limit int) {
	if r.set == nil {
		r.set = map[string]struct{}{}
	}
	if len(r.order) >= limit {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	r.set[id] = struct{}{}
	r.order = append(r.order, id)
}

// take reports whether id is in the set, removing it.
func (r *recentIDs) take(id string) bool {
	if _, ok := r.set[id]; !ok {
		return false
	}
	delete(r.set, id)
	for i, v := range r.order {
		if v == id {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
	return true
}

// cancelledLately reports whether the socket cancelled call id lately (and
// forgets it when done is set: its answer has come).
func (c *conn) cancelledLately(id string, done bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if done {
		return c.cancelled.take(id)
	}
	_, ok := c.cancelled.set[id]
	return ok
}
