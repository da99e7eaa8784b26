package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/tabbridge/tabbridge/store"
)

func (s *Server) mountAudit(me guard) {
	me.Get("/audit", s.getAudit)
	me.Get("/audit/stats", s.getAuditStats)
}

// auditStats is what the server's owner sees of the whole audit log.
type auditStats struct {
	store.AuditStats
	// RetentionSeconds is how long an entry is kept; 0: every entry is kept.
	RetentionSeconds int64 `json:"retentionSeconds"`
}

func (s *Server) auditStatsOf(c *fiber.Ctx) (auditStats, error) {
	st, err := s.opts.DB.AuditStats(c.UserContext())
	return auditStats{AuditStats: st, RetentionSeconds: int64(s.opts.AuditRetention / time.Second)}, err
}

// getAuditStats answers the server's owner with the audit log's size, its
// oldest entry and the retention; anyone else is refused.
func (s *Server) getAuditStats(c *fiber.Ctx) error {
	u, err := s.opts.DB.UserByID(c.UserContext(), userID(c))
	if err != nil {
		return storeError(err, "account")
	}
	if !u.IsOwner {
		return errorf(http.StatusForbidden, codeOwnerOnly, "Only the server's owner can see the size of the whole audit log.")
	}
	st, err := s.auditStatsOf(c)
	if err != nil {
		return err
	}
	return c.JSON(st)
}

// auditCursor reads "before", the id of the last entry of the page before:
// one that is not an entry's id is refused, not read as an empty page (the
// end of the log, to a client paging through it).
func auditCursor(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return "", badRequest(codeInvalidField, "Query parameter \"before\" must be an entry's id, as the last entry of the page before gives it.")
	}
	return id.String(), nil
}

// getAudit lists the person's audit log, newest first, filtered by the query
// parameters workspace, site, tool, task and outcome; before and limit page.
func (s *Server) getAudit(c *fiber.Ctx) error {
	before, err := auditCursor(c.Query("before"))
	if err != nil {
		return err
	}
	f := store.AuditFilter{
		WorkspaceID: c.Query("workspace"), Site: c.Query("site"), Tool: c.Query("tool"),
		TaskID: c.Query("task"), Outcome: c.Query("outcome"), Before: before,
	}
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return badRequest(codeInvalidField, "Query parameter \"limit\" must be a number from 1 to 500.")
		}
		f.Limit = n
	}
	entries, err := s.opts.DB.AuditLog(c.UserContext(), userID(c), f)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entries": entries})
}
