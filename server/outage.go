package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// When the database goes away, every request that needs it fails. An error
// that is not the request's own fault is checked against the database once:
// if it does not answer a ping, the answer says so (HTTP 503 with
// Retry-After, or a tool result for a call already past authentication)
// instead of a bare "internal" the caller cannot act on (issue 11 item 7).

// outageRetryAfter is the Retry-After sent while the database is unreachable.
const outageRetryAfter = 5 * time.Second

// outageMessage is what a client reads while the database is unreachable.
var outageMessage = fmt.Sprintf("The Tabbridge server cannot reach its database right now, so it could not serve this request; nothing was changed. "+
	"Retry in %d seconds or so; if it lasts, tell the person who runs the server.", int(outageRetryAfter/time.Second))

// databaseDown reports whether the database fails a ping now. It does not
// use the request's context: the request may already have given up.
func (s *Server) databaseDown() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.opts.DB.Ping(ctx) != nil
}

// outage answers a request that failed while the database is unreachable.
func outage(c *fiber.Ctx) error {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(outageRetryAfter/time.Second)))
	return writeError(c, errorf(http.StatusServiceUnavailable, codeDatabaseUnreachable, "%s", outageMessage))
}

// storeFailure is the error an MCP tool returns when the store failed while
// doing what: the outage sentence when the database is unreachable, else
// what failed and to try again.
func (s *Server) storeFailure(what string, err error) error {
	if s.databaseDown() {
		s.opts.Logger.Warn("mcp request met a database outage", "what", what, "err", err)
		return errors.New(outageMessage)
	}
	return fmt.Errorf("%s; try again: %w", what, err)
}
