package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/tabbridge/tabbridge/sitetools"
)

// pendingCall is a call sent to a browser and not yet answered.
type pendingCall struct {
	id string
	// documentID is where the extension dispatched it; "" until it says.
	// Guarded by the conn's mu.
	documentID string
	done       chan callOutcome // buffered 1; written once
}

type callOutcome struct {
	result json.RawMessage
	err    error
}

// Online reports whether any browser of the person is connected.
func (h *Hub) Online(userID string) bool { return len(h.browsersOf(userID)) > 0 }

// Invoke sends a call to one of the person's browsers and waits for its
// result until ctx ends (ctx carries the call's deadline). The browser is the
// first of inv.Targets that is connected — the one whose document was used
// most recently — else the one whose tab of the site was used most recently,
// else the most recently connected (its extension reopens the site).
// Cancelling ctx sends call.cancel to the browser.
func (h *Hub) Invoke(ctx context.Context, userID string, inv sitetools.Invocation) (json.RawMessage, error) {
	c, doc := h.route(userID, inv)
	if c == nil {
		return nil, sitetools.ErrOffline
	}
	frame, err := encodeCall(callMsg{Type: TypeCall, ID: inv.ID, Site: inv.Site, Tool: inv.Tool, Arguments: inv.Arguments,
		DocumentID: doc, URL: inv.LastURL, Deadline: inv.Deadline.UnixMilli(), Gate: inv.Gate})
	if err != nil {
		return nil, err
	}
	p := &pendingCall{id: inv.ID, done: make(chan callOutcome, 1)}
	if err := c.addCall(p); err != nil {
		if errors.Is(err, errClosing) {
			return nil, sitetools.ErrBrowserGone
		}
		return nil, err
	}
	if !c.put(outbound{data: frame, kind: outCall}) {
		c.takeCall(inv.ID, true)
		return nil, sitetools.ErrBrowserGone
	}
	select {
	case out := <-p.done:
		return out.result, out.err
	case <-ctx.Done():
		reason := "cancelled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "timeout"
		}
		// The call keeps its slot until its cancel leaves the queue (queue.go).
		if c.takeCall(inv.ID, false) != nil {
			c.put(outbound{data: encode(cancelMsg{Type: TypeCallCancel, CallID: inv.ID, Reason: reason}), kind: outCancel})
		}
		if reason == "timeout" {
			return nil, sitetools.ErrTimeout
		}
		return nil, ctx.Err()
	}
}

// CallsInFlight counts the call slots held in the person's browsers: calls
// sent and not answered, and cancelled ones whose cancel is still queued.
func (h *Hub) CallsInFlight(userID string) int {
	n := 0
	for _, c := range h.browsersOf(userID) {
		c.mu.Lock()
		n += c.inflight
		c.mu.Unlock()
	}
	return n
}

// route picks the socket and the preferred document for a call.
func (h *Hub) route(userID string, inv sitetools.Invocation) (*conn, string) {
	for _, t := range inv.Targets {
		if c := h.browser(userID, t.BrowserID); c != nil {
			return c, t.DocumentID
		}
	}
	if id, _, ok := h.Pick(userID, inv.Site); ok {
		if c := h.browser(userID, id); c != nil {
			return c, ""
		}
	}
	conns := h.browsersOf(userID)
	sort.Slice(conns, func(i, j int) bool { return conns[i].connectedAt.After(conns[j].connectedAt) })
	if len(conns) > 0 {
		return conns[0], ""
	}
	return nil, ""
}

// addCall registers a pending call in one of the browser's slots: errClosing
// once the socket is closing, a *sitetools.BusyError when every slot is held.
func (c *conn) addCall(p *pendingCall) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.callsClosed {
		return errClosing
	}
	if c.inflight >= c.h.opts.MaxCalls {
		return &sitetools.BusyError{Limit: c.h.opts.MaxCalls}
	}
	if c.calls == nil {
		c.calls = map[string]*pendingCall{}
	}
	c.calls[p.id] = p
	c.inflight++
	return nil
}

// pending reports whether call id is pending on the socket.
func (c *conn) pending(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id] != nil
}

// takeCall removes and returns a pending call, nil if it is not pending.
// With release, its slot is freed now; otherwise it is being cancelled: its
// queued call.cancel frees the slot, and an answer that crosses the cancel is
// expected (recentIDs).
func (c *conn) takeCall(id string, release bool) *pendingCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[id]
	delete(c.calls, id)
	switch {
	case p != nil && release:
		c.inflight--
	case p != nil:
		c.cancelled.add(id, c.h.opts.MaxCalls)
	}
	return p
}

// failCalls ends every pending call of the socket with err; with a document
// id, only the calls dispatched to that document.
func (c *conn) failCalls(documentID string, err error) {
	c.mu.Lock()
	var ended []*pendingCall
	for id, p := range c.calls {
		if documentID == "" || p.documentID == documentID {
			ended = append(ended, p)
			delete(c.calls, id)
			c.inflight-- // answered, in effect: its slot is free
		}
	}
	if documentID == "" {
		c.callsClosed = true
	}
	c.mu.Unlock()
	for _, p := range ended {
		p.done <- callOutcome{err: err}
	}
}

func (c *conn) dispatched(in *Inbound) {
	d := in.Dispatched
	c.mu.Lock()
	p := c.calls[d.CallID]
	if p != nil {
		p.documentID = d.DocumentID
	}
	c.mu.Unlock()
	if p != nil {
		return
	}
	e := protoErr(ErrCodeUnknownCall, in.ID, "No call %q is pending on this socket (it may have been cancelled or timed out).", clip(d.CallID))
	if c.cancelledLately(d.CallID, false) {
		c.offerError(e)
		return
	}
	c.sendError(e)
}

func (c *conn) result(in *Inbound) {
	r := in.Result
	if c.pending(r.CallID) && c.pace.holding() {
		// The page's announcements sent before its answer count first
		// (off the reader's stack, as announcements always are).
		OffStack(c.flushHeld)
	}
	p := c.takeCall(r.CallID, true)
	if p == nil {
		e := protoErr(ErrCodeUnknownCall, in.ID, "No call %q is pending on this socket (it may have been cancelled or timed out).", clip(r.CallID))
		if c.cancelledLately(r.CallID, true) {
			c.offerError(e)
			return
		}
		c.sendError(e)
		return
	}
	p.done <- outcomeOf(r)
}

// outcomeOf turns a call.result into what Invoke returns.
func outcomeOf(r *CallResult) callOutcome {
	if r.OK {
		if size := sitetools.ResultSize(r.Result); size > sitetools.MaxResultBytes {
			return callOutcome{err: &sitetools.TooLargeError{Size: size}}
		}
		return callOutcome{result: r.Result}
	}
	switch r.Error.Code {
	case "page_gone":
		return callOutcome{err: sitetools.ErrPageGone}
	case "timeout":
		return callOutcome{err: sitetools.ErrTimeout}
	case "result_too_large":
		return callOutcome{err: &sitetools.TooLargeError{Size: r.Error.Size}}
	}
	return callOutcome{err: &sitetools.PageError{Code: r.Error.Code, Message: r.Error.Message}}
}

func (c *conn) isShared(origin string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shared[origin]
}

func (c *conn) notShared(in *Inbound) {
	c.sendError(protoErr(ErrCodeSiteNotShared, in.ID, "%s is not shared, so its tools were not recorded. The person shares a site from the popup first.", in.Announce.Origin))
}

// process checks one document's tools and hands them to the catalog, once
// the socket's pace lets it (pace.go). Called under seq.
func (c *conn) process(in *Inbound) {
	a := in.Announce
	if !c.isShared(a.Origin) {
		c.notShared(in)
		return
	}
	tools, refused, err := sitetools.ParseDescriptors(a.Tools)
	if err != nil {
		c.sendError(protoErr(ErrCodeInvalidField, in.ID, "tools.announce: %s", err.Error()))
		return
	}
	if c.h.opts.Catalog == nil {
		return
	}
	err = c.h.opts.Catalog.Announce(c.h.ctx, c.userID, c.announceDocument(a, tools, refused))
	if errors.Is(err, sitetools.ErrNotShared) {
		c.sendError(protoErr(ErrCodeSiteNotShared, in.ID, "%s is no longer shared, so its tools were not recorded.", a.Origin))
		return
	}
	var refusal *sitetools.Refusal
	if errors.As(err, &refusal) {
		c.sendError(protoErr(ErrCodeInvalidField, in.ID, "tools.announce: %s", refusal.Reason))
		return
	}
	var limit *sitetools.LimitError
	if errors.As(err, &limit) {
		c.sendError(protoErr(ErrCodeLimitReached, in.ID, "tools.announce: %s", limit.Error()))
		return
	}
	if err != nil {
		c.h.opts.Logger.Error("announce tools", "user", c.userID, "origin", a.Origin, "err", err)
		c.sendError(protoErr("internal", in.ID, "The server could not record the tools; they will be taken at the next announcement."))
		return
	}
	c.enqueue(encode(acceptedMsg(in.ID, a.DocumentID, tools, refused)))
	c.changed(ChangeTools, a.Origin)
}

func acceptedMsg(ref, doc string, tools []sitetools.Descriptor, refused []*sitetools.Refusal) toolsAccepted {
	m := toolsAccepted{Type: TypeToolsAccepted, Ref: ref, DocumentID: doc, Accepted: []string{}, Refused: []refusedOut{}}
	for _, t := range tools {
		m.Accepted = append(m.Accepted, t.Name)
	}
	for _, r := range refused {
		m.Refused = append(m.Refused, refusedOut{Tool: r.Tool, Reason: r.Reason})
	}
	return m
}

func (c *conn) documentUsed(in *Inbound) {
	c.seq.Lock()
	defer c.seq.Unlock()
	c.pace.used(in.Document.DocumentID, in.Document.LastUsed)
	if c.h.opts.Catalog != nil {
		t := time.UnixMilli(in.Document.LastUsed)
		if in.Document.LastUsed == 0 || t.After(time.Now().Add(maxLastUsedSkew)) {
			t = time.Now()
		}
		c.h.opts.Catalog.Use(c.userID, c.browserID, in.Document.DocumentID, t)
	}
}

func (c *conn) documentGone(in *Inbound) {
	c.seq.Lock()
	defer c.seq.Unlock()
	c.dropHeld(in.Document.DocumentID)
	c.failCalls(in.Document.DocumentID, sitetools.ErrPageGone)
	if c.h.opts.Catalog != nil {
		if origin, ok := c.h.opts.Catalog.Forget(c.userID, c.browserID, in.Document.DocumentID); ok {
			c.changed(ChangeTools, origin)
		}
	}
}

// PushApprovals queues the approvals message for every connected browser of
// the person, coalesced with one still queued (queue.go): however many
// requests an agent opens at once, it never fills a socket's queue.
func (h *Hub) PushApprovals(userID string, msg ApprovalsMsg) {
	for _, c := range h.browsersOf(userID) {
		c.pushApprovals(msg)
	}
}

// SendApprovals queues the approvals message for one connected browser.
func (h *Hub) SendApprovals(userID, browserID string, msg ApprovalsMsg) {
	if c := h.browser(userID, browserID); c != nil {
		c.pushApprovals(msg)
	}
}
