package sitetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/store"
)

// CallRequest is an agent's callSiteTool.
type CallRequest struct {
	Site      string
	Tool      string
	Arguments json.RawMessage
	TaskID    string
}

// CallResult is what a completed call returns: the page's own result.
type CallResult struct {
	Site     string
	Tool     string
	Result   json.RawMessage
	Decision approvals.Decision
	// Untrusted is set when the site marks the tool untrustedContentHint:
	// the result may hold content the site does not vouch for.
	Untrusted bool
}

// Outcomes recorded in the audit log.
const (
	OutcomeOK        = "ok"
	OutcomeRefused   = "refused"   // not shared, no such tool, invalid arguments, no task
	OutcomeDenied    = "denied"    // the person said no
	OutcomeExpired   = "expired"   // nobody answered
	OutcomeWithdrawn = "withdrawn" // the server ended before an answer
	OutcomeCancelled = "cancelled" // the agent gave up
	OutcomeFailed    = "failed"    // the browser or page failed
	// OutcomeGone: the agent went away (its connection or session closed)
	// before the call could run or finish.
	OutcomeGone = "gone"
	// OutcomeRevoked: the person took the agent's access away (its token or
	// connected app revoked, or its workspace deleted) while the call ran.
	OutcomeRevoked = "revoked"
	// OutcomeRunning and OutcomeInterrupted are given by the store (equal to
	// store.OutcomeRunning and store.OutcomeInterrupted): a call recorded
	// before dispatch, and one a killed server left running.
	OutcomeRunning     = "running"
	OutcomeInterrupted = "interrupted"
)

// Call validates a call against the page's own schema, passes it through the
// approval gate, runs it in the person's browser and records it in the audit
// log. Every failure an agent can act on is an *AgentError; ctx's error is
// returned when the agent cancels or goes away (its cause then is
// approvals.ErrAgentGone). A call ended because the person took the agent's
// access away (ctx's cause approvals.ErrAccessRevoked) returns the
// AgentError that says so, whatever it was doing.
//
// A call that passes validation is recorded as running before it waits for
// the person or reaches a browser, and completed when it ends, so a server
// killed meanwhile leaves it visible (interrupted from the next start).
func (o *Ops) Call(ctx context.Context, a Agent, req CallRequest) (*CallResult, error) {
	start := time.Now()
	entry := &store.AuditEntry{UserID: a.OwnerID, WorkspaceID: a.WorkspaceID, TokenID: a.TokenID, TaskID: req.TaskID,
		Site: req.Site, Tool: req.Tool, ArgsBytes: int64(len(req.Arguments)), Decision: "none"}
	res, err := o.call(ctx, a, req, entry)
	entry.DurationMS = time.Since(start).Milliseconds()
	entry.Outcome, entry.Error = outcomeOf(ctx, res, err)
	if entry.RequestID != "" && res != nil {
		entry.Result = resultText(res.Result) // the person who allowed it sees what it did
	}
	// The row (completed once if begun, else appended) is written off the
	// call's path, with the next group commit; OnCall hears of it then.
	o.opts.DB.CompleteAudit(entry, func(aerr error) {
		if aerr != nil {
			o.opts.Logger.Error("audit", "err", aerr)
		} else if o.opts.OnCall != nil {
			o.opts.OnCall(entry)
		}
	})
	if err != nil && errors.Is(context.Cause(ctx), approvals.ErrAccessRevoked) {
		return nil, accessRevoked(req.Tool, req.Site)
	}
	return res, err
}

// accessRevoked is what an agent reads when the person took its access away
// while its call ran or waited.
func accessRevoked(tool, origin string) *AgentError {
	return agentErr("access_revoked", "%s on %s was stopped before it finished: the person took away this agent's access to their Tabbridge workspace "+
		"(revoked its token or connected app, or deleted the workspace). A call waiting for approval was withdrawn and not run; one already running "+
		"in the page was cancelled there. Every request with these credentials is refused from now on: stop this work and tell the person; "+
		"they can give you access again from the Tabbridge web app if they want you to go on.", tool, origin)
}

// begin records a call that passed validation as running, before it can
// wait for the person or reach a browser; the call goes no further unless
// the row is committed.
func (o *Ops) begin(ctx context.Context, entry *store.AuditEntry) error {
	if err := o.opts.DB.BeginAudit(context.WithoutCancel(ctx), entry); err != nil {
		entry.CreatedAt = time.Time{} // not begun: Call appends the ended row if it can
		return fmt.Errorf("record call: %w", err)
	}
	return nil
}

func (o *Ops) call(ctx context.Context, a Agent, req CallRequest, entry *store.AuditEntry) (*CallResult, error) {
	site, d, err := o.find(ctx, a, req.Site, req.Tool)
	if err != nil {
		return nil, err
	}
	entry.Site = site.Origin
	if err := o.validate(d, site.Origin, req.Arguments); err != nil {
		return nil, err
	}
	if err := o.runnable(a, site.Origin, d); err != nil {
		return nil, err
	}
	if err := o.begin(ctx, entry); err != nil {
		return nil, err
	}
	dec, err := o.opts.Gate.Decide(ctx, approvals.Call{OwnerID: a.OwnerID, WorkspaceID: a.WorkspaceID, TokenID: a.TokenID, TaskID: req.TaskID,
		Site: site.Origin, Tool: d.Name, Arguments: req.Arguments, ReadOnly: d.ReadOnly(), Consequential: d.Annotations.ConsequentialHint,
		Title: d.Title, Description: d.Description, InputSchema: d.InputSchema})
	entry.Decision, entry.DecidedBy = string(dec.Source), dec.DecidedBy
	if dec.Source == approvals.SourceAsked || dec.Source == approvals.SourceRemembered {
		entry.RequestID = dec.RequestID
	}
	if err != nil {
		if errors.Is(err, approvals.ErrNoSuchTask) {
			entry.TaskID = "" // not this workspace's: the call is not filed under it
		}
		return nil, o.gateError(err, site.Origin, d.Name, ctx)
	}
	if !dec.Allowed {
		return nil, o.refusal(dec, site.Origin, d.Name)
	}
	if dec.Source == approvals.SourceAsked {
		// The person may have unshared or moved the site while the call
		// waited for them: it runs only if this workspace still has it. The
		// page may have registered the tool again meanwhile: the arguments
		// the person approved must still fit the schema it has now.
		if site, d, err = o.find(ctx, a, req.Site, req.Tool); err != nil {
			return nil, err
		}
		if err := o.validate(d, site.Origin, req.Arguments); err != nil {
			return nil, err
		}
		if err := o.runnable(a, site.Origin, d); err != nil {
			return nil, err
		}
	}
	if hungUp(ctx) { // the agent left as the answer came: nothing runs
		<-ctx.Done() // ends soon, as a cancel or as gone (WithHangup)
		return nil, ctx.Err()
	}
	out, err := o.invoke(ctx, a, site, d, req.Arguments, dec.Source)
	if err != nil {
		return nil, err
	}
	entry.ResultBytes = int64(len(out))
	return &CallResult{Site: site.Origin, Tool: d.Name, Result: out, Decision: dec, Untrusted: d.Annotations.UntrustedContentHint}, nil
}

func (o *Ops) validate(d Descriptor, origin string, args json.RawMessage) error {
	schema, err := d.Schema()
	if err != nil {
		return agentErr("invalid_schema", "The page's schema for %s cannot be used: %v. The site must fix it; nothing was run.", d.Name, err)
	}
	viol, aerr := schema.Check(args)
	if aerr != nil {
		return argumentsRefusal(aerr, d.Name, origin)
	}
	if len(viol) == 0 {
		return nil
	}
	return agentErr(CodeInvalidArguments, "The arguments do not match the input schema of %s on %s, so nothing was run:\n%s\nFix them and call again; getSiteToolDefinition returns the full schema.",
		d.Name, origin, listViolations(viol))
}

// argumentsRefusal heads a refusal of the arguments as a whole by what it is: too large, not
// UTF-8 text, or not a JSON object the schema can be applied to.
func argumentsRefusal(e *ArgumentsError, tool, origin string) error {
	line := listViolations([]Violation{e.Violation})
	if e.Ambiguous {
		return agentErr(e.Code, "The arguments for %s on %s could be read two ways, so they were not checked and nothing was run:\n%s\nFix them and call again.", tool, origin, line)
	}
	switch e.Code {
	case CodeArgumentsTooLarge:
		return agentErr(e.Code, "The arguments for %s on %s are too large, so they were not checked and nothing was run:\n%s", tool, origin, line)
	case CodeArgumentsNotUTF8:
		return agentErr(e.Code, "The arguments for %s on %s are not valid UTF-8 text, so nothing was run:\n%s\nFix them and call again.", tool, origin, line)
	}
	return agentErr(e.Code, "The arguments do not match the input schema of %s on %s, so nothing was run:\n%s\nFix them and call again; getSiteToolDefinition returns the full schema.",
		tool, origin, line)
}

func listViolations(viol []Violation) string {
	lines := make([]string, len(viol))
	for i, v := range viol {
		lines[i] = "- " + v.String()
	}
	return strings.Join(lines, "\n")
}

// runnable refuses, before the approval gate, a call that cannot run whatever the person says:
// with no browser of theirs connected, asking them would only make them approve nothing; and a
// form without toolautosubmit is one the site wants the person to submit themselves.
func (o *Ops) runnable(a Agent, origin string, d Descriptor) error {
	if d.NeedsPerson() {
		return agentErr("needs_person", "%s on %s is a form the site wants the person to check and submit themselves (it has no toolautosubmit), so it cannot be run remotely; nothing was filled in or submitted. Ask the person to fill it in on %s, or use another tool.", d.Name, origin, AgentAddress(d.URL))
	}
	if !o.opts.Invoker.Online(a.OwnerID) {
		return offlineError(origin)
	}
	return nil
}

// taskFinished tells the agent its task is over (status "" when it ended
// while the call waited): nothing of it is asked or run any more.
func taskFinished(status, tool, origin string) error {
	switch status {
	case "rejected":
		return agentErr("task_finished", "%s on %s was not asked or run: its task is rejected, so the person does not want that work done. Do not go on with it; ask the person what they want instead.", tool, origin)
	case "completed":
		return agentErr("task_finished", "%s on %s was not asked or run: its task is completed. If this is more of the same work, set the task back to ongoing with updateTask; if it is new work, open a task with createTask; then call again.", tool, origin)
	}
	return agentErr("task_finished", "%s on %s was not run: its task was set to completed or rejected while the call waited for the person. Call listTasks to see the task's status before going on.", tool, origin)
}

func offlineError(origin string) error {
	return agentErr("browser_offline", "The person's Chrome is not connected to Tabbridge, so %s cannot run tools right now; nothing was run and nobody was asked. Ask them to open Chrome (signed in to the Tabbridge extension), then call again.", origin)
}

func (o *Ops) gateError(err error, origin, tool string, ctx context.Context) error {
	var limit *approvals.LimitError
	var finished *approvals.TaskFinishedError
	switch {
	case errors.As(err, &limit):
		return agentErr("approvals_full", "%s on %s was not asked or run: %s", tool, origin, limit.Message)
	case errors.Is(err, approvals.ErrTaskRequired):
		return agentErr("task_required", "%s changes something on %s, so the person approves it inside a task: pass taskId (open a task with createTask, or find yours with listTasks) and call again.", tool, origin)
	case errors.Is(err, approvals.ErrNoSuchTask):
		return agentErr("task_not_found", "That taskId is not a task of this workspace. Call listTasks to find yours, or createTask to open one, and call again.")
	case errors.As(err, &finished):
		return taskFinished(finished.Status, tool, origin)
	case errors.Is(err, approvals.ErrWorkspaceGone):
		return agentErr("workspace_deleted", "%s on %s was not asked or run: the person deleted the workspace this token belongs to while the call was placed, and the token no longer works. Ask the person for a token of a workspace that shares %s.", tool, origin, origin)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return err
}

func (o *Ops) refusal(dec approvals.Decision, origin, tool string) error {
	switch dec.Source {
	case approvals.SourceExpired:
		return agentErr("approval_expired", "Nobody answered the approval request for %s on %s within %s, so it was not run. Ask the person to check the Tabbridge inbox, then call again if it is still needed.",
			tool, origin, o.opts.ApprovalWindow)
	case approvals.SourceWithdrawn:
		switch dec.Withdrawn {
		case approvals.WithdrawUnshared:
			return agentErr("approval_withdrawn", "The approval request for %s on %s was withdrawn because the person stopped sharing %s with this workspace, so it was not run. Call listSiteTools to see the sites you can use.", tool, origin, origin)
		case approvals.WithdrawTaskFinished:
			return taskFinished("", tool, origin)
		case approvals.WithdrawRevoked:
			return accessRevoked(tool, origin)
		case approvals.WithdrawShutdown:
			return agentErr("approval_withdrawn", "The approval request for %s on %s was withdrawn before anyone answered because the Tabbridge server is shutting down (usually to restart), so it was not run. Call again in a moment.", tool, origin)
		}
		return agentErr("approval_withdrawn", "The approval request for %s on %s was withdrawn before anyone answered, so it was not run. Call again if it is still needed.", tool, origin)
	case approvals.SourceRemembered:
		return agentErr("denied", "The person already denied this same call of %s on %s in this task (same arguments, at %s), so they were not asked again and it was not run. Do not repeat it: plan around the denial, or ask the person what they want instead; they can let it be asked again from the task's page in Tabbridge.",
			tool, origin, dec.DecidedAt.UTC().Format(time.RFC3339))
	}
	return agentErr("denied", "The person denied this call of %s on %s; it was not run. Do not repeat the same call: plan around it, or ask the person what they want instead.", tool, origin)
}

func (o *Ops) invoke(ctx context.Context, a Agent, site Site, d Descriptor, args json.RawMessage, gate approvals.Source) (json.RawMessage, error) {
	deadline := time.Now().Add(o.opts.CallTimeout)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	inv := Invocation{ID: store.NewID(), Site: site.Origin, Tool: d.Name, Arguments: args, LastURL: d.URL, Deadline: deadline, Gate: string(gate)}
	if inv.LastURL == "" {
		inv.LastURL = site.LastURL
	}
	inv.Targets = o.opts.Catalog.Targets(a.OwnerID, site.Origin, d.Name)
	out, err := o.opts.Invoker.Invoke(cctx, a.OwnerID, inv)
	if size := ResultSize(out); err == nil && size > MaxResultBytes {
		err = &TooLargeError{Size: size}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, o.invokeError(err, site.Origin, d.Name)
	}
	return out, nil
}

func (o *Ops) invokeError(err error, origin, tool string) error {
	var tl *TooLargeError
	var pe *PageError
	var busy *BusyError
	switch {
	case errors.As(err, &busy):
		return agentErr("browser_busy", "The person's Chrome is already running %d tool calls, the most one browser runs at once, so %s on %s was not sent. Wait for some of your calls to finish (or cancel those you no longer need), then call again.",
			busy.Limit, tool, origin)
	case errors.As(err, &tl):
		return agentErr("result_too_large", "%s on %s returned %d bytes; results are limited to %d bytes and are never truncated. Ask for less (narrower arguments) and call again.",
			tool, origin, tl.Size, MaxResultBytes)
	case errors.As(err, &pe) && pe.Code == "tool_changed":
		// The page that would run it offers the tool otherwise than the
		// server checked it (now a write, or consequential): nothing ran.
		return agentErr("tool_changed", "%s on %s was not run: %s", tool, origin, pe.Message)
	case errors.As(err, &pe) && (pe.Code == "tool_not_registered" || pe.Code == "site_not_open"):
		// The extension found no page offering the tool: nothing ran.
		return agentErr("tool_not_offered", "%s on %s did not run: %s Call listSiteTools to see what the site offers now.", tool, origin, pe.Message)
	case errors.As(err, &pe):
		return agentErr("tool_failed", "%s on %s failed in the page: %s", tool, origin, pe.Message)
	case errors.Is(err, ErrOffline):
		return offlineError(origin)
	case errors.Is(err, ErrInstanceGone):
		return agentErr("instance_gone", "The Tabbridge server instance holding the person's Chrome stopped or could not be reached while %s on %s was sent to it; Chrome reconnects to another instance by itself within seconds. If the call reached the page it may have had an effect: check before calling again.", tool, origin)
	case errors.Is(err, ErrBrowserGone):
		return agentErr("browser_gone", "The person's Chrome disconnected while %s was running on %s. Whether it had an effect is unknown: check before calling again.", tool, origin)
	case errors.Is(err, ErrPageGone):
		return agentErr("page_gone", "The page running %s on %s went away (it navigated, reloaded, its tab closed, or Chrome discarded the tab to save memory) before the tool finished. Whether it had an effect is unknown: check before calling again.", tool, origin)
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return agentErr("timeout", "%s on %s did not finish within %s, so it was cancelled in the page. It may have had an effect: check before calling again.", tool, origin, o.opts.CallTimeout)
	}
	return fmt.Errorf("run %s on %s: %w", tool, origin, err)
}

// ErrInstanceGone means the call was forwarded to the server instance
// holding the browser, and that instance stopped or could not be reached.
var ErrInstanceGone = errors.New("sitetools: the instance holding the browser went away")

type hangupKey struct{}

// WithHangup returns ctx carrying a channel closed as soon as the agent's
// connection closed. The caller must end ctx shortly after that channel
// closes (it may first wait to learn whether the agent cancelled or went
// away); meanwhile a call the person allows is not dispatched.
//
// probe, when not nil, looks at the connection itself at the moment a call
// the person allowed is about to be dispatched: the watch that closes
// hungUp runs on its own goroutine, so on a loaded machine an answer can
// arrive before it has seen a hang-up that already happened. probe true
// means the agent is gone (and probe has closed hungUp).
func WithHangup(ctx context.Context, hungUp <-chan struct{}, probe func() bool) context.Context {
	return context.WithValue(ctx, hangupKey{}, hangup{ch: hungUp, probe: probe})
}

type hangup struct {
	ch    <-chan struct{}
	probe func() bool
}

// hungUp reports whether ctx has ended or its agent's connection closed.
func hungUp(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	h, _ := ctx.Value(hangupKey{}).(hangup)
	if h.ch == nil {
		return false
	}
	select {
	case <-h.ch:
		return true
	default:
		return h.probe != nil && h.probe()
	}
}

// resultText is a page's result as the person reads it: a string's text, any
// other value's JSON.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// outcomeOf names a call's outcome for the audit log.
func outcomeOf(ctx context.Context, res *CallResult, err error) (outcome, message string) {
	if err == nil {
		return OutcomeOK, ""
	}
	if errors.Is(context.Cause(ctx), approvals.ErrAccessRevoked) {
		return OutcomeRevoked, "the person took the agent's access away while the call ran; it was not run, or was cancelled in the page"
	}
	if errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), approvals.ErrAgentGone) {
		return OutcomeGone, "the agent went away (its connection or session closed) before the call finished; it was not run, or was cancelled in the page"
	}
	if errors.Is(err, context.Canceled) {
		return OutcomeCancelled, "the agent cancelled the call"
	}
	var ae *AgentError
	if errors.As(err, &ae) {
		switch ae.Code {
		case "denied":
			return OutcomeDenied, ae.Message
		case "approval_expired":
			return OutcomeExpired, ae.Message
		case "approval_withdrawn":
			return OutcomeWithdrawn, ae.Message
		case "not_shared", "site_not_shared", "site_ambiguous", "no_such_tool", CodeInvalidArguments, CodeArgumentsTooLarge, CodeArgumentsNotUTF8, "invalid_schema", "task_required", "task_not_found", "task_finished", "needs_person", "tool_not_offered",
			"browser_busy", "approvals_full":
			return OutcomeRefused, ae.Message
		}
		return OutcomeFailed, ae.Message
	}
	return OutcomeFailed, err.Error()
}
