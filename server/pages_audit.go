package server

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

// auditPageSize is how many entries the audit page shows at a time.
const auditPageSize = 50

// auditChoices are the values the audit filters offer: the sites, tools
// and tasks the person's log holds, and every outcome a call can have.
type auditChoices struct {
	Sites, Tools, Outcomes, Tasks []string
}

// auditOutcomes are the outcome filter's choices, in the order of their
// values (as the other filters are ordered).
var auditOutcomes = slices.Sorted(maps.Keys(outcomes))

// auditChoicesOf reads the distinct sites, tools and tasks of the person's
// log, each through its index one value at a time (the page re-renders on
// every finished call, and the log only grows); a value chosen in the
// address is offered even if absent.
func (s *Server) auditChoicesOf(c *fiber.Ctx, f store.AuditFilter) (auditChoices, error) {
	out := auditChoices{Outcomes: slices.Clone(auditOutcomes)}
	for _, col := range []struct {
		name string
		into *[]string
	}{{"site", &out.Sites}, {"tool", &out.Tools}, {"task_id", &out.Tasks}} {
		vals, err := s.opts.DB.AuditValues(c.UserContext(), userID(c), col.name)
		if err != nil {
			return out, fmt.Errorf("audit choices: %w", err)
		}
		*col.into = vals
	}
	for _, col := range []struct {
		chosen string
		into   *[]string
	}{{f.Site, &out.Sites}, {f.Tool, &out.Tools}, {f.TaskID, &out.Tasks}, {f.Outcome, &out.Outcomes}} {
		if col.chosen != "" && !contains(*col.into, col.chosen) {
			*col.into = append(*col.into, col.chosen)
		}
		sort.Strings(*col.into)
	}
	return out, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// pageAudit shows the person's audit log, newest first, filtered by the
// query (site, tool, task, outcome) and paged with before=<entry id>.
func (s *Server) pageAudit(c *fiber.Ctx) error {
	before, err := auditCursor(c.Query("before"))
	if err != nil {
		return err
	}
	f := store.AuditFilter{Site: c.Query("site"), Tool: c.Query("tool"), TaskID: c.Query("task"),
		Outcome: c.Query("outcome"), Before: before, Limit: auditPageSize + 1}
	entries, err := s.opts.DB.AuditLog(c.UserContext(), userID(c), f)
	if err != nil {
		return err
	}
	older := ""
	if len(entries) > auditPageSize {
		entries = entries[:auditPageSize]
		older = auditURL(f, entries[len(entries)-1].ID)
	}
	choices, err := s.auditChoicesOf(c, f)
	if err != nil {
		return err
	}
	n, err := s.namesFor(c)
	if err != nil {
		return err
	}
	// The task filter names every task the log holds: one query for all.
	if err := n.preloadAllTasks(); err != nil {
		return err
	}
	args, err := s.auditArguments(c, entries)
	if err != nil {
		return err
	}
	filtered := f.Site != "" || f.Tool != "" || f.TaskID != "" || f.Outcome != ""
	u := s.pageUser(c)
	var stats *auditStats
	if u != nil && u.IsOwner { // the size of the whole log is the owner's to see
		st, err := s.auditStatsOf(c)
		if err != nil {
			return err
		}
		stats = &st
	}
	return s.render(c, http.StatusOK, "audit", view{Title: "Audit log", Nav: "audit", Src: auditURL(f, f.Before), User: u,
		Data: fiber.Map{"Entries": entries, "Filter": f, "Choices": choices, "Names": n, "Older": older,
			"Newest": auditURL(f, ""), "Filtered": filtered, "Stats": stats, "RetentionDays": retentionDays(s.opts.AuditRetention), "Args": args}})
}

// retentionDays is the retention in whole days, as the audit page says it.
func retentionDays(d time.Duration) string {
	days := int64(d / (24 * time.Hour))
	if days == 1 {
		return "1 day"
	}
	if days >= 1 {
		return fmt.Sprintf("%d days", days)
	}
	return d.String()
}

// auditArguments are the arguments of the calls that asked the person
// (their requests keep them), by request id, for "Arguments" on demand.
// The log itself keeps only their size.
func (s *Server) auditArguments(c *fiber.Ctx, entries []store.AuditEntry) (map[string]string, error) {
	var ids []string
	for _, e := range entries {
		if e.RequestID != "" {
			ids = append(ids, e.RequestID)
		}
	}
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct{ ID, Arguments string }
	err := s.opts.DB.WithContext(c.UserContext()).Table("approval_requests").Select("id, arguments").
		Where("user_id = ? AND id IN ?", userID(c), ids).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("audit arguments: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Arguments
	}
	return out, nil
}

// Agent names the token or connected app that made a call, "" if unknown.
func (n *names) Agent(workspaceID, tokenID string) string {
	k := "agent\x00" + workspaceID + "\x00" + tokenID
	if a, ok := n.people[k]; ok {
		return a
	}
	a := n.s.agentName(n.ctx, workspaceID, tokenID)
	n.people[k] = a
	return a
}

// personError is a call's error as the person reads it: the sentences that
// tell the agent what to do next ("Do not repeat the same call…") are for
// the agent, and the outcome's badge already says a denial or an expiry.
func personError(outcome, msg string) string {
	switch outcome {
	case "denied":
		return "You (or another of your screens) said no; the agent was told it did not run."
	case "expired":
		return "Nobody answered in time, so it counted as denied."
	}
	var keep []string
	for _, sentence := range strings.SplitAfter(msg, ". ") {
		t := strings.TrimSpace(sentence)
		if agentFacing(t) {
			continue
		}
		keep = append(keep, t)
	}
	if len(keep) == 0 {
		return shown(msg)
	}
	return shown(strings.Join(keep, " ")) // a page's own words: what it hides is shown (pages_text.go)
}

// agentFacing reports whether a sentence of an error is advice to the agent.
func agentFacing(sentence string) bool {
	for _, p := range []string{"Do not ", "Don't ", "Ask the person", "Call ", "Try ", "Retry", "Use ", "Wait ", "Plan around", "Send ", "Pass ", "Fix "} {
		if strings.HasPrefix(sentence, p) {
			return true
		}
	}
	return false
}

// auditURL is the audit page's address for filter f, from before on.
func auditURL(f store.AuditFilter, before string) string {
	q := url.Values{}
	for k, v := range map[string]string{"site": f.Site, "tool": f.Tool, "task": f.TaskID, "outcome": f.Outcome, "before": before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return "/audit"
	}
	return "/audit?" + q.Encode()
}

// Decision says where a call's decision came from, in words.
func (n *names) Decision(e store.AuditEntry) string {
	switch e.Decision {
	case "read-only":
		return "Read-only"
	case "grant":
		return "Grant"
	case "asked":
		if e.DecidedBy != "" {
			return "Asked — answered by " + n.Person(e.DecidedBy)
		}
		return "Asked"
	case "expired":
		return "Expired unanswered"
	case "withdrawn":
		return "Withdrawn"
	case "remembered":
		if e.DecidedBy != "" {
			return "Denied before by " + n.Person(e.DecidedBy) + " — not asked again"
		}
		return "Denied before — not asked again"
	case "", "none":
		return "None"
	}
	return e.Decision
}

// size writes a byte count as a person reads it.
func size(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
}

// took writes a duration in milliseconds as a person reads it.
func took(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	case ms%60_000 < 1000:
		return fmt.Sprintf("%d min", ms/60_000)
	}
	return fmt.Sprintf("%d min %d s", ms/60_000, ms%60_000/1000)
}
