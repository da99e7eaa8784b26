package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
)

// routes mounts every endpoint. Person endpoints take a cookie session and
// CSRF protection; agent endpoints take an agent token and nothing else.
func (s *Server) routes() {
	app := s.app
	app.Use(noSniff)
	app.Use("/api", noStore)
	app.Use(s.requestID)
	app.Use(s.logRequests)
	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)
	s.mountMetrics()

	// Fiber applies a group's handlers to every path under its prefix, so
	// the guards are attached per route: /api/agent/… must never run the
	// person guard, and person routes must never accept an agent token.
	web := guard{app.Group("/api"), []fiber.Handler{s.ensureCSRFCookie, s.csrf}}
	s.mountAccounts(web)
	s.mountWorkspaces(web.with(s.person))
	s.mountAudit(web.with(s.person))
	s.mountApprovals(web.with(s.person))

	web.Get("/events", s.sessionOrError, s.getEvents)
	s.mountPages()
	s.mountExtension(web)
	s.mountTerminals(web.with(s.person))

	agent := guard{app.Group("/api/agent"), []fiber.Handler{s.oneOfEachHeader, s.agent}}
	agent.Get("/workspace", s.agentWorkspace)
	s.mountOAuth()
	s.mountMCP()
	s.app.Use(s.notFoundPage)
}

// noSniff tells browsers to take every answer as the type it says it is:
// a JSON error or an agent's text must never be sniffed into a script or a
// page. It is set before any handler runs, so errors and 404s carry it too.
func noSniff(c *fiber.Ctx) error {
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	return c.Next()
}

// noStore keeps every API answer out of caches: many carry a secret shown
// once (a new agent token, an invitation link, a ticket, the CSRF token) and
// all of them are one person's.
func noStore(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Next()
}

// guard registers routes with a fixed chain of handlers in front.
type guard struct {
	r     fiber.Router
	chain []fiber.Handler
}

func (g guard) with(h ...fiber.Handler) guard {
	return guard{g.r, append(append([]fiber.Handler{}, g.chain...), h...)}
}

func (g guard) add(method, path string, h []fiber.Handler) {
	g.r.Add(method, path, append(append([]fiber.Handler{}, g.chain...), h...)...)
}

// Get registers a GET route behind the guard.
func (g guard) Get(path string, h ...fiber.Handler) { g.add(fiber.MethodGet, path, h) }

// Post registers a POST route behind the guard.
func (g guard) Post(path string, h ...fiber.Handler) { g.add(fiber.MethodPost, path, h) }

// Patch registers a PATCH route behind the guard.
func (g guard) Patch(path string, h ...fiber.Handler) { g.add(fiber.MethodPatch, path, h) }

// Delete registers a DELETE route behind the guard.
func (g guard) Delete(path string, h ...fiber.Handler) { g.add(fiber.MethodDelete, path, h) }

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if err := s.opts.DB.Ping(ctx); err != nil {
		s.opts.Logger.Warn("readiness: database unreachable", "err", err)
		return errorf(http.StatusServiceUnavailable, codeDatabaseUnreachable, "The database does not answer; the server cannot serve requests yet.")
	}
	if !s.registry.Healthy() {
		return errorf(http.StatusServiceUnavailable, codeRegistryStale, "This instance has not renewed its heartbeat in the instance registry recently; the other instances may take it for dead.")
	}
	if !s.bus.Healthy() {
		return errorf(http.StatusServiceUnavailable, codeSignalsDown, "This instance's connection for signals from the other instances is down; it is reconnecting.")
	}
	return c.JSON(fiber.Map{"status": "ready", "instance": s.id, "instances": s.registry.Size()})
}

func (s *Server) logRequests(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	if err != nil {
		if herr := s.app.ErrorHandler(c, err); herr != nil {
			return herr
		}
	}
	status := c.Response().StatusCode()
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelWarn
	}
	if s.opts.Logger.Enabled(c.UserContext(), level) {
		s.logFor(c).Log(c.UserContext(), level, "request", "method", c.Method(), "path", c.Path(), "status", status, "took", time.Since(start))
	}
	return nil
}
