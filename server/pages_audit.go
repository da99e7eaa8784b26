package server

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
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
	f := store.AuditFilter{Site: c.Query("site"), Tool: c.Query("tool"), TaskID: c.Query("task"),
		Outcome: c.Query("outcome"), Before: c.Query("before"), Limit: auditPageSize + 1}
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
			"Newest": auditURL(f, ""), "Filtered": filtered, "Stats": stats, "RetentionDays": retentionDays(s.opts.AuditRetention)}})
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
