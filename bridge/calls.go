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
		DocumentID: doc, URL: inv.LastURL, Deadline: inv.Deadline.UnixMilli()})
	if err != nil {
		return nil, err
	}
	p := &pendingCall{id: inv.ID, done: make(chan callOutcome, 1)}
	if !c.addCall(p) {
		return nil, sitetools.ErrBrowserGone
	}
	if !c.enqueue(frame) {
		c.takeCall(inv.ID)
		return nil, sitetools.ErrBrowserGone
	}
	select {
	case out := <-p.done:
		return out.result, out.err
	case <-ctx.Done():
		c.takeCall(inv.ID)
		reason := "cancelled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "timeout"
		}
		c.enqueue(encode(cancelMsg{Type: TypeCallCancel, CallID: inv.ID, Reason: reason}))
		if reason == "timeout" {
			return nil, sitetools.ErrTimeout
		}
		return nil, ctx.Err()
	}
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

// addCall registers a pending call; false once the socket is closing.
func (c *conn) addCall(p *pendingCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.callsClosed {
		return false
	}
	if c.calls == nil {
		c.calls = map[string]*pendingCall{}
	}
	c.calls[p.id] = p
	return true
}

// takeCall removes and returns a pending call, nil if it is not pending.
func (c *conn) takeCall(id string) *pendingCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.calls[id]
	delete(c.calls, id)
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
	if p == nil {
		c.sendError(protoErr(ErrCodeUnknownCall, in.ID, "No call %q is pending on this socket (it may have been cancelled or timed out).", clip(d.CallID)))
	}
}

func (c *conn) result(in *Inbound) {
	r := in.Result
	p := c.takeCall(r.CallID)
	if p == nil {
		c.sendError(protoErr(ErrCodeUnknownCall, in.ID, "No call %q is pending on this socket (it may have been cancelled or timed out).", clip(r.CallID)))
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

// announce checks one document's tools and hands them to the catalog.
func (c *conn) announce(in *Inbound) {
	a := in.Announce
	c.mu.Lock()
	shared := c.shared[a.Origin]
	c.mu.Unlock()
	if !shared {
		c.sendError(protoErr(ErrCodeSiteNotShared, in.ID, "%s is not shared, so its tools were not recorded. The person shares a site from the popup first.", a.Origin))
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
	err = c.h.opts.Catalog.Announce(c.h.ctx, c.userID, c.announceDocument(a, tools))
	if errors.Is(err, sitetools.ErrNotShared) {
		c.sendError(protoErr(ErrCodeSiteNotShared, in.ID, "%s is no longer shared, so its tools were not recorded.", a.Origin))
		return
	}
	var refusal *sitetools.Refusal
	if errors.As(err, &refusal) {
		c.sendError(protoErr(ErrCodeInvalidField, in.ID, "tools.announce: %s", refusal.Reason))
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
	if c.h.opts.Catalog != nil {
		t := time.UnixMilli(in.Document.LastUsed)
		if in.Document.LastUsed == 0 || t.After(time.Now().Add(maxLastUsedSkew)) {
			t = time.Now()
		}
		c.h.opts.Catalog.Use(c.userID, c.browserID, in.Document.DocumentID, t)
	}
}

func (c *conn) documentGone(in *Inbound) {
	c.failCalls(in.Document.DocumentID, sitetools.ErrPageGone)
	if c.h.opts.Catalog != nil {
		if origin, ok := c.h.opts.Catalog.Forget(c.userID, c.browserID, in.Document.DocumentID); ok {
			c.changed(ChangeTools, origin)
		}
	}
}

// Broadcast queues msg for every connected browser of the person.
func (h *Hub) Broadcast(userID string, msg any) {
	b := encode(msg)
	for _, c := range h.browsersOf(userID) {
		c.enqueue(b)
	}
}
