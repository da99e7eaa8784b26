package server

import (
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

// headerRequestID carries a request's id: taken from the request when a
// load balancer or another instance set a well-formed one, else made here;
// always echoed on the response and written on the request's log lines.
const headerRequestID = "X-Request-Id"

const localRequestID = "requestID"

// requestID gives every request its id (see headerRequestID).
func (s *Server) requestID(c *fiber.Ctx) error {
	id := c.Get(headerRequestID)
	if !wellFormedRequestID(id) {
		id = store.NewID()
	}
	c.Locals(localRequestID, id)
	c.Set(headerRequestID, id)
	c.Request().Header.Set(headerRequestID, id) // for handlers behind the adaptor (MCP), and forwarded calls
	return c.Next()
}

// wellFormedRequestID accepts 1 to 64 letters, digits, '-', '_' or '.':
// what load balancers generate, and nothing that could forge a log line.
func wellFormedRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// logFor is the server's logger with the request's id and instance.
func (s *Server) logFor(c *fiber.Ctx) *slog.Logger {
	id, _ := c.Locals(localRequestID).(string)
	return s.opts.Logger.With("request_id", id, "instance", s.id)
}
