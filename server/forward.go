package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/sitetools"
)

// Forwarding calls between instances (docs/DECISIONS.md, "Forwarding
// between instances"). The call path runs where the agent's request
// arrived — validation, the approval gate, the audit row, progress,
// cancel — and only the last step, running the approved call in a
// browser, goes to the instance holding that browser: the forwarder is
// the operations' Invoker. It picks the browser whose document offering
// the tool was used most recently among this instance's (the catalog's
// targets) and the others' (the directory), and either hands the call to
// the local hub or posts it to the instance holding the browser, whose
// hub runs it. The agent's cancel closes the forwarded request, which
// cancels the call there; the deadline travels with the call.

// forwarder is the Invoker of the operations.
type forwarder struct{ s *Server }

// forwardMargin is how long past a call's deadline the forwarded request
// may last: the other instance answers "timeout" itself at the deadline.
const forwardMargin = 2 * time.Second

// Online reports whether a browser of the person is connected to any instance.
// A person whose browsers are reconnecting (their instance went away
// moments ago) counts as online: the call waits for them (Invoke).
func (f forwarder) Online(userID string) bool {
	if f.s.hub.Online(userID) || f.s.dir.browsers(userID) > 0 {
		return true
	}
	until, _ := f.s.dir.reconnecting(userID)
	return !until.IsZero()
}

// Invoke runs inv in the person's browser on whichever instance holds it.
// An instance that cannot be reached (nothing was sent: it died, and the
// directory has not heard yet) is dropped and the call routed once more.
func (f forwarder) Invoke(ctx context.Context, userID string, inv sitetools.Invocation) (json.RawMessage, error) {
	local := inv.Targets
	for attempt := 0; ; attempt++ {
		inv.Targets = local
		instance, targets := f.route(ctx, userID, inv)
		if instance == "" && !f.s.hub.Online(userID) && f.awaitBrowser(ctx, userID) {
			inv.Targets = f.s.catalog.Targets(userID, inv.Site, inv.Tool)
			local = inv.Targets
			instance, targets = f.route(ctx, userID, inv)
		}
		if instance == "" {
			return f.s.hub.Invoke(ctx, userID, inv)
		}
		inv.Targets = targets
		res, err := f.forward(ctx, instance, userID, inv)
		if attempt == 0 && errors.Is(err, cluster.ErrNotSent) {
			continue
		}
		return res, err
	}
}

// awaitBrowser waits, while the person's browsers are reconnecting after
// their instance went away (a rolling restart), until one is connected
// again somewhere; false when none is, or is not expected.
func (f forwarder) awaitBrowser(ctx context.Context, userID string) bool {
	for {
		until, wake := f.s.dir.reconnecting(userID)
		if f.s.hub.Online(userID) || f.s.dir.browsers(userID) > 0 {
			return true
		}
		if until.IsZero() {
			return false
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// route returns the instance to run inv on ("" for this one) and its
// targets there. The local targets come with inv; an instance whose site
// was used less recently than the best target so far cannot hold a better
// one, so most calls ask no other instance anything.
func (f forwarder) route(ctx context.Context, userID string, inv sitetools.Invocation) (string, []sitetools.Target) {
	var best time.Time
	if len(inv.Targets) > 0 {
		best = inv.Targets[0].LastUsed
	}
	instance, targets := "", inv.Targets
	for _, r := range f.s.dir.sites(userID, inv.Site) {
		if !time.UnixMilli(r.entry.LastUsed).After(best) {
			break
		}
		t := f.remoteTargets(ctx, r, userID, inv.Site)[inv.Tool]
		if len(t) > 0 && t[0].LastUsed.After(best) {
			best, instance, targets = t[0].LastUsed, r.instance, t
		}
	}
	if instance != "" || len(targets) > 0 || f.s.hub.Online(userID) {
		return instance, targets
	}
	// No document offers the tool anywhere, and no browser is here: an
	// instance whose browser has the site open, else any with a browser,
	// reopens it.
	if sites := f.s.dir.sites(userID, inv.Site); len(sites) > 0 {
		return sites[0].instance, nil
	}
	if with := f.s.dir.withBrowsers(userID); len(with) > 0 {
		return with[0], nil
	}
	return "", nil
}

// remoteTargets returns a remote site's per-tool targets, from the cache
// when the directory entry has not changed since they were fetched.
func (f forwarder) remoteTargets(ctx context.Context, r remoteSite, userID, origin string) map[string][]sitetools.Target {
	k := targetsKey{r.instance, userID, origin}
	if t, ok := f.s.dir.cachedTargets(k, r.entry.Seq); ok {
		return t
	}
	var out struct {
		Targets map[string][]sitetools.Target `json:"targets"`
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f.s.in.peers.PostJSON(ctx, r.instance, "/internal/v1/targets", targetsIn{User: userID, Origin: origin}, &out); err != nil {
		f.s.opts.Logger.Warn("read another instance's targets", "instance", r.instance, "err", err, "request_id", cluster.RequestID(ctx))
		if errors.Is(err, cluster.ErrPeerGone) {
			f.s.dir.drop(r.instance)
		}
		return nil
	}
	f.s.dir.cacheTargets(k, r.entry.Seq, out.Targets)
	return out.Targets
}

type targetsIn struct {
	User   string `json:"user"`
	Origin string `json:"origin"`
}

// invokeIn is a forwarded call.
type invokeIn struct {
	User       string               `json:"user"`
	Invocation sitetools.Invocation `json:"invocation"`
}

// invokeOut is its outcome: the page's result, or the error, by kind.
type invokeOut struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *invokeError    `json:"error,omitempty"`
}

type invokeError struct {
	Kind    string `json:"kind"` // offline, browser_gone, page_gone, timeout, too_large, busy, page, stopping, other
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	N       int    `json:"n,omitempty"` // too_large: the size; busy: the limit
}

// forward posts the call to instance and waits for its outcome. Cancelling
// ctx closes the request, which cancels the call there; at ctx's deadline
// the other instance answers "timeout" itself, within forwardMargin.
func (f forwarder) forward(ctx context.Context, instance, userID string, inv sitetools.Invocation) (json.RawMessage, error) {
	start := time.Now()
	f.s.opts.Logger.Debug("call forwarded", "instance", instance, "call", inv.ID, "request_id", cluster.RequestID(ctx))
	hctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), inv.Deadline.Add(forwardMargin))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	defer stop()
	var out invokeOut
	err := f.s.in.peers.PostJSON(hctx, instance, "/internal/v1/invoke", invokeIn{User: userID, Invocation: inv}, &out)
	f.s.metrics.forwarded(time.Since(start), err)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, sitetools.ErrTimeout
		}
		f.s.opts.Logger.Warn("forwarded call failed", "instance", instance, "err", err, "request_id", cluster.RequestID(ctx))
		if errors.Is(err, cluster.ErrPeerGone) {
			f.s.dir.drop(instance)
		}
		return nil, fmt.Errorf("%w (%w)", sitetools.ErrInstanceGone, err)
	}
	if out.Error != nil {
		return nil, out.Error.err()
	}
	return out.Result, nil
}

// errorOf encodes an Invoker's error for the wire.
func errorOf(err error) *invokeError {
	var tl *sitetools.TooLargeError
	var pe *sitetools.PageError
	var busy *sitetools.BusyError
	switch {
	case errors.As(err, &tl):
		return &invokeError{Kind: "too_large", N: tl.Size}
	case errors.As(err, &busy):
		return &invokeError{Kind: "busy", N: busy.Limit}
	case errors.As(err, &pe):
		return &invokeError{Kind: "page", Code: pe.Code, Message: pe.Message}
	case errors.Is(err, sitetools.ErrOffline):
		return &invokeError{Kind: "offline"}
	case errors.Is(err, sitetools.ErrBrowserGone):
		return &invokeError{Kind: "browser_gone"}
	case errors.Is(err, sitetools.ErrPageGone):
		return &invokeError{Kind: "page_gone"}
	case errors.Is(err, sitetools.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return &invokeError{Kind: "timeout"}
	}
	return &invokeError{Kind: "other", Message: err.Error()}
}

// err decodes it.
func (e *invokeError) err() error {
	switch e.Kind {
	case "too_large":
		return &sitetools.TooLargeError{Size: e.N}
	case "busy":
		return &sitetools.BusyError{Limit: e.N}
	case "page":
		return &sitetools.PageError{Code: e.Code, Message: e.Message}
	case "offline":
		return sitetools.ErrOffline
	case "browser_gone":
		return sitetools.ErrBrowserGone
	case "page_gone":
		return sitetools.ErrPageGone
	case "timeout":
		return sitetools.ErrTimeout
	case "stopping":
		return sitetools.ErrInstanceGone
	}
	return errors.New("the other instance: " + e.Message)
}

// internalInvoke runs a forwarded call in a browser held here. The request
// ending (the caller cancelled, or went away) cancels it; its deadline is
// the call's.
func (s *Server) internalInvoke(w http.ResponseWriter, r *http.Request) {
	in, err := decodeInvokeIn(r.Body)
	if err != nil {
		writeInternalError(w, http.StatusBadRequest, codeInvalidJSON, "A forwarded call is {\"user\", \"invocation\"}: "+err.Error()+".")
		return
	}
	inv := in.Invocation
	if s.ctx.Err() != nil { // shutting down: the caller's call goes to no browser here
		writeJSON(w, invokeOut{Error: &invokeError{Kind: "stopping"}})
		return
	}
	// This instance's own targets are the freshest: the caller's came from
	// a snapshot of them.
	if t := s.catalog.Targets(in.User, inv.Site, inv.Tool); len(t) > 0 {
		inv.Targets = t
	}
	s.internalLog(r.Context()).Debug("forwarded call", "call", inv.ID, "site", inv.Site, "tool", inv.Tool)
	ctx, cancel := context.WithDeadline(r.Context(), inv.Deadline)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // shutting down: the call ends now, and says so
	defer stop()
	res, err := s.hub.Invoke(ctx, in.User, inv)
	if size := sitetools.ResultSize(res); err == nil && size > sitetools.MaxResultBytes {
		err = &sitetools.TooLargeError{Size: size}
	}
	if err != nil && r.Context().Err() != nil {
		return // the caller is gone: nobody reads an answer
	}
	if err != nil && s.ctx.Err() != nil { // stopping: its browsers reconnect elsewhere
		writeJSON(w, invokeOut{Error: &invokeError{Kind: "stopping"}})
		return
	}
	if err != nil {
		writeJSON(w, invokeOut{Error: errorOf(err)})
		return
	}
	writeJSON(w, invokeOut{Result: res})
}

// internalTargets answers a site's per-tool targets on this instance.
func (s *Server) internalTargets(w http.ResponseWriter, r *http.Request) {
	var in targetsIn
	err := decodeInternalBody(r.Body, 1<<20, &in)
	if err == nil && (in.User == "" || in.Origin == "") {
		err = errors.New("it has no user or no origin")
	}
	if err != nil {
		writeInternalError(w, http.StatusBadRequest, codeInvalidJSON, "A targets request is {\"user\", \"origin\"}: "+err.Error()+".")
		return
	}
	writeJSON(w, map[string]any{"targets": s.catalog.AllTargets(in.User, in.Origin)})
}

// maxInvokeBody bounds a forwarded call: the arguments, the targets and the
// addresses, far under it.
const maxInvokeBody = 8 << 20

// decodeInternalBody reads the body of another instance's request: one JSON
// value of at most limit bytes, into v. Members v does not name are
// ignored, so an instance of a newer version can add some during a rolling
// upgrade. The error says what is wrong.
func decodeInternalBody(body io.Reader, limit int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return fmt.Errorf("the body could not be read (%v)", err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("the body is over %d bytes", limit)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not that JSON (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

// decodeInvokeIn reads a forwarded call: it names the person, the call and
// when the call ends.
func decodeInvokeIn(body io.Reader) (invokeIn, error) {
	var in invokeIn
	if err := decodeInternalBody(body, maxInvokeBody, &in); err != nil {
		return invokeIn{}, err
	}
	switch {
	case in.User == "":
		return invokeIn{}, errors.New("it has no user")
	case in.Invocation.ID == "" || in.Invocation.Site == "" || in.Invocation.Tool == "":
		return invokeIn{}, errors.New("its invocation has no ID, Site or Tool")
	case in.Invocation.Deadline.IsZero():
		return invokeIn{}, errors.New("its invocation has no Deadline (a call with none would end at once, as a timeout)")
	}
	return in, nil
}

func (s *Server) forwardRoutes() {
	s.HandleInternal("POST /internal/v1/invoke", http.HandlerFunc(s.internalInvoke))
	s.HandleInternal("POST /internal/v1/targets", http.HandlerFunc(s.internalTargets))
	s.HandleInternal("POST /internal/v1/directory", http.HandlerFunc(s.internalDirectory))
	s.HandleInternal("/internal/v1/mcp", http.HandlerFunc(s.internalMCP))
	s.HandleInternal("POST /internal/v1/browsers", http.HandlerFunc(s.internalBrowsers))
}
