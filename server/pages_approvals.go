package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
)

// The approval pages: the inbox of waiting requests (the home page, where
// the popup opens), the answer forms, grants, and the audit log. The task
// page's timeline of approvals and calls is built here too.
func (s *Server) mountApprovalPages(me guard) {
	me.Get("/", s.pageInbox)
	me.Post("/approvals/:id/answer", s.postPageAnswer)
	me.Post("/approvals/:id/forget", s.postPageForgetDenial)
	me.Get("/grants", s.pageGrants)
	me.Post("/grants/:id/revoke", s.postPageRevokeGrant)
	me.Get("/audit", s.pageAudit)
}

// ApprovalGate is the server's approval gate: the call path raises requests
// through it, and end-to-end tests raise them as an agent's call would.
func (s *Server) ApprovalGate() *approvals.Gate { return s.gate }

// names resolves the ids pages show (workspaces, tasks, people) to what a
// person reads, once per id per page, always scoped to the viewer.
type names struct {
	s          *Server
	ctx        context.Context
	uid        string
	workspaces map[string]string
	tasks      map[string]*store.Task
	allTasks   bool // tasks holds every task the viewer has
	people     map[string]string
}

func (s *Server) namesFor(c *fiber.Ctx) (*names, error) {
	ws, err := s.opts.DB.Workspaces(c.UserContext(), userID(c))
	if err != nil {
		return nil, err
	}
	n := &names{s: s, ctx: c.UserContext(), uid: userID(c), workspaces: map[string]string{},
		tasks: map[string]*store.Task{}, people: map[string]string{}}
	for _, w := range ws {
		n.workspaces[w.ID] = w.Name
	}
	return n, nil
}

// Workspace is the name of one of the viewer's workspaces ("" once deleted).
func (n *names) Workspace(id string) string { return n.workspaces[id] }

// Task is one of the viewer's tasks, or nil when it is gone.
func (n *names) Task(id string) *store.Task {
	if id == "" {
		return nil
	}
	if t, ok := n.tasks[id]; ok || n.allTasks {
		return t
	}
	t, err := n.s.opts.DB.Task(n.ctx, n.uid, id)
	if err != nil {
		t = nil
	}
	n.tasks[id] = t
	return t
}

// tasksQuery selects the viewer's tasks, in all their workspaces.
func (n *names) tasksQuery() *gorm.DB {
	return n.s.opts.DB.WithContext(n.ctx).Joins("JOIN workspaces ON workspaces.id = tasks.workspace_id").
		Where("workspaces.owner_id = ?", n.uid)
}

// preloadTasks looks up the tasks ids name in one query (one per
// taskBatch), so that the page's Task calls for them need none.
func (n *names) preloadTasks(ids []string) error {
	var want []string
	for _, id := range ids {
		if _, ok := n.tasks[id]; !ok && id != "" && !n.allTasks && !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	for batch := range slices.Chunk(want, taskBatch) {
		var ts []store.Task
		if err := n.tasksQuery().Where("tasks.id IN ?", batch).Find(&ts).Error; err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		for _, id := range batch {
			n.tasks[id] = nil // gone, unless found
		}
		for i := range ts {
			n.tasks[ts[i].ID] = &ts[i]
		}
	}
	return nil
}

// taskBatch bounds the ids in one IN list, well under both databases' limit
// on a statement's parameters.
const taskBatch = 500

// preloadAllTasks reads every task the viewer has in one query, for a page
// that may name any number of them; Task then never queries.
func (n *names) preloadAllTasks() error {
	var ts []store.Task
	if err := n.tasksQuery().Find(&ts).Error; err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	for i := range ts {
		n.tasks[ts[i].ID] = &ts[i]
	}
	n.allTasks = true
	return nil
}

// Person names who decided: "you" for the viewer.
func (n *names) Person(id string) string {
	if id == n.uid {
		return "you"
	}
	if p, ok := n.people[id]; ok {
		return p
	}
	p := "someone else"
	if u, err := n.s.opts.DB.UserByID(n.ctx, id); err == nil {
		p = u.Name
	}
	n.people[id] = p
	return p
}

func (s *Server) inboxView(c *fiber.Ctx) (view, error) {
	reqs, err := s.gate.Pending(c.UserContext(), userID(c), "")
	if err != nil {
		return view{}, err
	}
	n, err := s.namesFor(c)
	if err != nil {
		return view{}, err
	}
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.TaskID
	}
	answered, err := s.recentAnswered(c.UserContext(), userID(c))
	if err != nil {
		return view{}, err
	}
	for _, a := range answered {
		ids = append(ids, a.TaskID)
	}
	if err := n.preloadTasks(ids); err != nil {
		return view{}, err
	}
	check, err := s.checklistFor(c.UserContext(), userID(c))
	if err != nil {
		return view{}, err
	}
	return view{Title: "Inbox", Nav: "inbox", Src: "/", User: s.pageUser(c),
		Data: fiber.Map{"Requests": s.cards(c.UserContext(), userID(c), reqs), "Answered": answered, "Names": n,
			"Grace": s.gate.Grace().String(), "Checklist": check}}, nil
}

// pageInbox is the home page: every request waiting for the person, oldest
// first, with its arguments and the three answers.
func (s *Server) pageInbox(c *fiber.Ctx) error {
	v, err := s.inboxView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "inbox", v)
}

// postPageAnswer answers a request from the inbox or a task page and goes
// back there. A request that ended meanwhile is no error to the person: the
// page says so calmly and shows what still waits.
func (s *Server) postPageAnswer(c *fiber.Ctx) error {
	back := answerBack(c.FormValue("back"))
	// The count of identical calls the page showed: 0 when the agent had gone
	// (the card says so), absent from a form made before it was sent; either
	// answers for one call.
	seen := 1
	if v := c.FormValue("waiters"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest(codeInvalidField, "Field \"waiters\" must be the number of identical calls the page showed, a whole number; nothing was answered.")
		}
		seen = max(n, 1)
	}
	r, err := s.gate.AnswerFor(c.UserContext(), userID(c), c.Params("id"), approvals.Answer(c.FormValue("answer")), seen)
	if errors.Is(err, approvals.ErrMoreCalls) {
		v, verr := s.backView(c, back)
		if verr != nil {
			return verr
		}
		v.Data["Notice"] = fmt.Sprintf("More identical calls joined this request after it was shown: %d wait now, and Allow runs each of them. Nothing was run yet; look at it again and answer.", r.Waiters)
		return s.render(c, http.StatusConflict, backPage(back), v)
	}
	if errors.Is(err, approvals.ErrNotPending) || errors.Is(err, approvals.ErrAgentGone) {
		v, verr := s.backView(c, back)
		if verr != nil {
			return verr
		}
		if errors.Is(err, approvals.ErrAgentGone) {
			v.Data["Notice"] = agentGoneNotice
		} else {
			v.Data["Notice"] = s.endedNotice(c, c.Params("id"))
		}
		return s.render(c, http.StatusConflict, backPage(back), v)
	}
	if err != nil {
		return approvalError(err)
	}
	return c.Redirect(back, http.StatusSeeOther)
}

// postPageForgetDenial lets a denied call be asked again: the task page's
// button under a remembered denial.
func (s *Server) postPageForgetDenial(c *fiber.Ctx) error {
	back := answerBack(c.FormValue("back"))
	_, err := s.gate.ForgetDenial(c.UserContext(), userID(c), c.Params("id"))
	if errors.Is(err, approvals.ErrNotRemembered) {
		v, verr := s.backView(c, back)
		if verr != nil {
			return verr
		}
		v.Data["Notice"] = notRememberedNotice
		return s.render(c, http.StatusConflict, backPage(back), v)
	}
	if err != nil {
		return approvalError(err)
	}
	return c.Redirect(back, http.StatusSeeOther)
}

// backPage is the template of the page an answer form came from.
func backPage(back string) string {
	if back != "/" {
		return "task"
	}
	return "inbox"
}

// endedNotice tells the person how a request they tried to answer ended.
func (s *Server) endedNotice(c *fiber.Ctx, id string) string {
	r, err := s.gate.Request(c.UserContext(), userID(c), id)
	if err != nil {
		return "That request already ended; nothing waits on it now."
	}
	return "That request already ended (" + requestLabel(r) + "); nothing waits on it now."
}

// answerBack is where an answer form returns: the inbox or a task page.
func answerBack(back string) string {
	if strings.HasPrefix(back, "/tasks/") && !strings.ContainsAny(back[len("/tasks/"):], "/?#\\\r\n") && len(back) > len("/tasks/") {
		return back
	}
	return "/"
}

// backView builds the page an answer form came from, to show a notice on it.
func (s *Server) backView(c *fiber.Ctx, back string) (view, error) {
	if id, ok := strings.CutPrefix(back, "/tasks/"); ok {
		return s.taskViewOf(c, id)
	}
	return s.inboxView(c)
}

// timelineItem is one line of a task's history: a request or a call.
type timelineItem struct {
	At       time.Time
	Approval *approvals.Request
	// Runs are the calls that waited on Approval, with their outcomes (and
	// results), so the person who answered sees what their answer did.
	Runs []*store.AuditEntry
	Call *store.AuditEntry
}

// taskTimeline merges a task's requests and calls in time order. A call's
// time is its id's, to the millisecond, a request's to the microsecond, so
// both are compared at the millisecond: within one, requests come first
// (a call that waits on a request begins after it; which of the two came
// first is not known otherwise), then calls, each kind oldest first.
func (s *Server) taskTimeline(ctx context.Context, uid, taskID string) ([]timelineItem, error) {
	reqs, err := s.gate.TaskRequests(ctx, uid, taskID)
	if err != nil {
		return nil, err
	}
	calls, err := s.opts.DB.AuditLog(ctx, uid, store.AuditFilter{TaskID: taskID, Limit: 500})
	if err != nil {
		return nil, err
	}
	runs := map[string][]*store.AuditEntry{}
	for i := len(calls) - 1; i >= 0; i-- { // oldest first
		if id := calls[i].RequestID; id != "" {
			runs[id] = append(runs[id], &calls[i])
		}
	}
	out := make([]timelineItem, 0, len(reqs)+len(calls))
	for i := range reqs {
		out = append(out, timelineItem{At: reqs[i].CreatedAt, Approval: &reqs[i], Runs: runs[reqs[i].ID]})
	}
	for i := len(calls) - 1; i >= 0; i-- {
		out = append(out, timelineItem{At: calls[i].CreatedAt, Call: &calls[i]})
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].At.Truncate(time.Millisecond).Before(out[j].At.Truncate(time.Millisecond))
	})
	return out, nil
}

func (s *Server) grantsView(c *fiber.Ctx) (view, error) {
	gs, err := s.gate.Grants(c.UserContext(), userID(c))
	if err != nil {
		return view{}, err
	}
	n, err := s.namesFor(c)
	if err != nil {
		return view{}, err
	}
	var reqs []approvals.Request
	if len(gs) > 0 {
		ids := make([]string, len(gs))
		for i, g := range gs {
			ids[i] = g.RequestID
		}
		err := s.opts.DB.WithContext(c.UserContext()).Where("user_id = ? AND id IN ?", userID(c), ids).Find(&reqs).Error
		if err != nil {
			return view{}, fmt.Errorf("grant requests: %w", err)
		}
	}
	taskOf := map[string]string{}
	ids := make([]string, 0, len(reqs))
	for _, r := range reqs {
		taskOf[r.ID] = r.TaskID
		ids = append(ids, r.TaskID)
	}
	if err := n.preloadTasks(ids); err != nil {
		return view{}, err
	}
	return view{Title: "Grants", Nav: "grants", Src: "/grants", User: s.pageUser(c),
		Data: fiber.Map{"Grants": gs, "Names": n, "TaskOf": taskOf, "Notice": ifQuery(c, "revoked",
			"Grant revoked: the next such call asks you again.")}}, nil
}

func (s *Server) pageGrants(c *fiber.Ctx) error {
	v, err := s.grantsView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "grants", v)
}

func (s *Server) postPageRevokeGrant(c *fiber.Ctx) error {
	if err := s.revokeGrant(c.UserContext(), userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.Redirect("/grants?revoked=1", http.StatusSeeOther)
}

// requestLabel says how a request ended, or that it waits.
func requestLabel(r approvals.Request) string {
	switch r.Status {
	case approvals.StatusPending:
		return "Waiting"
	case approvals.StatusAllowed:
		if r.Answer == approvals.AlwaysAllow {
			return "Always allowed"
		}
		return "Allowed once"
	case approvals.StatusDenied:
		return "Denied"
	case approvals.StatusExpired:
		return "Expired unanswered"
	case approvals.StatusWithdrawn:
		if why, ok := withdrawnLabels[r.WithdrawnReason]; ok {
			return "Withdrawn: " + why
		}
		return "Withdrawn"
	}
	return r.Status
}

// withdrawnLabels say why a request was withdrawn; rows withdrawn before
// the reason was recorded say only "Withdrawn".
var withdrawnLabels = map[approvals.WithdrawReason]string{
	approvals.WithdrawCancelled:    "the agent cancelled the call",
	approvals.WithdrawUnshared:     "the site is no longer shared with this workspace",
	approvals.WithdrawShutdown:     "the server shut down",
	approvals.WithdrawRestart:      "the server restarted",
	approvals.WithdrawGone:         "the agent stopped waiting",
	approvals.WithdrawInstanceLost: "the server instance the agent's call went through stopped; the agent must call again",
	approvals.WithdrawTaskFinished: "its task was marked completed or rejected",
	approvals.WithdrawRevoked:      "you took the agent's access away",
}

// outcomes names each outcome a call is recorded with, and colours its
// badge like the task status badges: green ran, amber the person said no,
// red it could not run, grey it ended before an answer.
var outcomes = map[string]struct{ label, class string }{
	sitetools.OutcomeOK:        {"OK", "status-completed"},
	sitetools.OutcomeRefused:   {"Refused", "status-rejected"},
	sitetools.OutcomeDenied:    {"Denied", "status-blocked"},
	sitetools.OutcomeExpired:   {"Expired unanswered", "status-notstarted"},
	sitetools.OutcomeWithdrawn: {"Withdrawn", "status-notstarted"},
	sitetools.OutcomeCancelled: {"Cancelled by the agent", "status-notstarted"},
	sitetools.OutcomeFailed:    {"Failed", "status-rejected"},
	sitetools.OutcomeGone:      {"Agent went away", "status-notstarted"},
	sitetools.OutcomeRevoked:   {"Agent's access taken away", "status-notstarted"},
	sitetools.OutcomeRunning:   {"Running", "status-ongoing"},
	// A killed server left it running: the person should look at the page.
	sitetools.OutcomeInterrupted: {"Interrupted", "status-rejected"},
}

// outcomeLabel names a call's outcome.
func outcomeLabel(o string) string {
	if l, ok := outcomes[o]; ok {
		return l.label
	}
	return o
}

// outcomeClass colours an outcome badge.
func outcomeClass(o string) string {
	if l, ok := outcomes[o]; ok {
		return l.class
	}
	return "status-rejected"
}

// requestClass colours a request's badge.
func requestClass(status string) string {
	switch status {
	case approvals.StatusPending:
		return "status-ongoing"
	case approvals.StatusAllowed:
		return "status-completed"
	case approvals.StatusDenied:
		return "status-rejected"
	}
	return "status-notstarted"
}

// pendingCards are the cards of the requests still waiting in a task's
// timeline, by id: the task page answers them too, so it shows their
// arguments as the inbox does (the tool's parameters first, marked rows,
// blank lines said), not only as raw JSON.
func (s *Server) pendingCards(ctx context.Context, uid string, timeline []timelineItem) map[string]*requestCard {
	var reqs []approvals.Request
	for _, it := range timeline {
		if it.Approval != nil && it.Approval.Status == approvals.StatusPending {
			reqs = append(reqs, *it.Approval)
		}
	}
	cards := s.cards(ctx, uid, reqs)
	out := make(map[string]*requestCard, len(cards))
	for i := range cards {
		out[cards[i].ID] = &cards[i]
	}
	return out
}
