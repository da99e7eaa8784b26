package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/bridge"
)

func (s *Server) mountApprovals(me guard) {
	me.Get("/approvals", s.getApprovals)
	me.Post("/approvals/:id/answer", s.postAnswer)
	me.Post("/approvals/:id/forget", s.postForgetDenial)
	me.Get("/grants", s.getGrants)
	me.Delete("/grants/:id", s.deleteGrant)
	me.Get("/tasks/:id/approvals", s.getTaskApprovals)
}

// getApprovals lists the person's pending requests, oldest first; ?task=
// narrows them to one task.
func (s *Server) getApprovals(c *fiber.Ctx) error {
	if id := c.Query("task"); id != "" { // a task that is not the person's is refused, not an empty list
		if _, err := s.opts.DB.Task(c.UserContext(), userID(c), id); err != nil {
			return storeError(err, "task")
		}
	}
	reqs, err := s.gate.Pending(c.UserContext(), userID(c), c.Query("task"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"approvals": reqs})
}

// getTaskApprovals lists every request of one of the person's tasks, in time order.
func (s *Server) getTaskApprovals(c *fiber.Ctx) error {
	t, err := s.opts.DB.Task(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "task")
	}
	reqs, err := s.gate.TaskRequests(c.UserContext(), userID(c), t.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"approvals": reqs})
}

func (s *Server) postAnswer(c *fiber.Ctx) error {
	var in struct {
		Answer string `json:"answer"`
		// Waiters is how many identical calls the answering screen showed; optional.
		Waiters int `json:"waiters"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	r, err := s.gate.AnswerFor(c.UserContext(), userID(c), c.Params("id"), approvals.Answer(in.Answer), in.Waiters)
	if err != nil {
		return approvalError(err)
	}
	return c.JSON(fiber.Map{"approval": r})
}

// postForgetDenial lets the call of a denied request be asked again.
func (s *Server) postForgetDenial(c *fiber.Ctx) error {
	r, err := s.gate.ForgetDenial(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return approvalError(err)
	}
	return c.JSON(fiber.Map{"approval": r})
}

// notRememberedNotice tells the person that a request they wanted asked
// again is no longer a remembered denial.
const notRememberedNotice = "That request is not a denial being remembered (it was already let go, or it was not denied); nothing changed."

// agentGoneNotice tells the person that their answer came when no call
// waited on the request any more.
const agentGoneNotice = "The agent stopped waiting for this call (its connection closed), so nothing was run and the request is withdrawn. If the agent calls again, a new request appears."

func approvalError(err error) error {
	switch {
	case errors.Is(err, approvals.ErrBadAnswer):
		return badRequest(codeInvalidField, "Field \"answer\" must be \"once\", \"always\" or \"deny\".")
	case errors.Is(err, approvals.ErrNoStandingGrant):
		return badRequest(codeNoStandingGrant, "The site marks this tool as consequential: every call must be confirmed, so it cannot be always allowed. Answer \"once\" or \"deny\".")
	case errors.Is(err, approvals.ErrNotFound):
		return notFound("approval request")
	case errors.Is(err, approvals.ErrAgentGone):
		return errorf(http.StatusConflict, codeAgentGone, agentGoneNotice)
	case errors.Is(err, approvals.ErrMoreCalls):
		return errorf(http.StatusConflict, codeMoreCalls, "More identical calls joined this request since it was shown, and Allow would run each of them; nothing was run yet. Look at the request again and answer it anew.")
	case errors.Is(err, approvals.ErrNotRemembered):
		return errorf(http.StatusConflict, codeNotRemembered, notRememberedNotice)
	case errors.Is(err, approvals.ErrNotPending):
		return errorf(http.StatusConflict, codeNotPending, "This request was already answered, expired, or withdrawn by its caller; nothing waits on it now.")
	}
	return err
}

func (s *Server) getGrants(c *fiber.Ctx) error {
	gs, err := s.gate.Grants(c.UserContext(), userID(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"grants": gs})
}

func (s *Server) deleteGrant(c *fiber.Ctx) error {
	if err := s.revokeGrant(c.UserContext(), userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// onApproval tells the person's screens that a request changed: their open
// pages through the event stream, their browsers' badges and notifications
// through the extension socket.
func (s *Server) onApproval(ownerID string, e approvals.Event) {
	s.logApproval(e)
	s.publish(ownerID, e.Type, e.Request)
	if e.Type == "approval.updated" {
		return // the count of waiting requests is unchanged: no badge message
	}
	ref := bridge.ApprovalRef{ID: e.Request.ID, Tool: e.Request.Tool, Site: e.Request.Site, TaskID: e.Request.TaskID}
	s.pushBadge(ownerID, e.Type, ref)
	if sig, err := json.Marshal(badgeSignal{User: ownerID, Event: e.Type, Request: ref}); err == nil {
		s.signal(topicBadge, sig) // the person's browsers on other instances
	}
}

// badgeSignal tells the other instances to update the person's browsers
// they hold: badge count and notification.
type badgeSignal struct {
	User    string             `json:"u"`
	Event   string             `json:"e"`
	Request bridge.ApprovalRef `json:"r"`
}

// pushBadge sends the person's browsers on this instance the count of
// waiting requests and what changed.
func (s *Server) pushBadge(ownerID, event string, ref bridge.ApprovalRef) {
	if len(s.hub.Connected(ownerID)) == 0 {
		return // no browser of theirs here: spare the count
	}
	if msg, ok := s.badge(ownerID); ok {
		msg.Event = event
		msg.Request = &ref
		s.hub.PushApprovals(ownerID, msg)
	}
}

// sendApprovalCount gives a browser that just connected the badge count: the
// approvals message is otherwise sent only when a request changes.
func (s *Server) sendApprovalCount(ownerID, browserID string) {
	if msg, ok := s.badge(ownerID); ok {
		s.hub.SendApprovals(ownerID, browserID, msg)
	}
}

// badge is the approvals message with the person's pending count.
func (s *Server) badge(ownerID string) (bridge.ApprovalsMsg, bool) {
	n, err := s.gate.PendingCount(context.Background(), ownerID)
	if err != nil {
		s.opts.Logger.Warn("count pending approvals", "err", err)
		return bridge.ApprovalsMsg{}, false
	}
	return bridge.ApprovalsMsg{Type: bridge.TypeApprovals, Pending: n}, true
}

// logApproval tells the operator, at info level, that an agent asked and how
// the request ended (answered, expired, withdrawn by its caller).
func (s *Server) logApproval(e approvals.Event) {
	r := e.Request
	msg := map[string]string{"approval.created": "approval asked", "approval.decided": "approval answered",
		"approval.expired": "approval expired", "approval.withdrawn": "approval withdrawn"}[e.Type]
	if msg == "" {
		s.opts.Logger.Debug("approval event", "type", e.Type, "request", r.ID)
		return
	}
	s.opts.Logger.Info(msg, "request", r.ID, "user", r.UserID, "workspace", r.WorkspaceID, "site", r.Site, "tool", r.Tool,
		"status", r.Status, "answer", string(r.Answer))
}
