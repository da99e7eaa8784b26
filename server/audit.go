package server

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

func (s *Server) mountAudit(me guard) {
	me.Get("/audit", s.getAudit)
}

// getAudit lists the person's audit log, newest first, filtered by the query
// parameters workspace, site, tool, task and outcome; before and limit page.
func (s *Server) getAudit(c *fiber.Ctx) error {
	f := store.AuditFilter{
		WorkspaceID: c.Query("workspace"), Site: c.Query("site"), Tool: c.Query("tool"),
		TaskID: c.Query("task"), Outcome: c.Query("outcome"), Before: c.Query("before"),
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
