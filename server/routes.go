package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
)

// routes mounts every endpoint. Person endpoints take a cookie session and
// CSRF protection; agent endpoints take an agent token and nothing else.
func (s *Server) routes() {
	app := s.app
	app.Use(s.logRequests)
	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)

	api := app.Group("/api", s.ensureCSRFCookie, s.csrf)
	s.mountAccounts(api)

	me := api.Group("", s.person)
	s.mountWorkspaces(me)

	agent := app.Group("/api/agent", s.agent)
	agent.Get("/workspace", s.agentWorkspace)
}

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.Context(), 2*time.Second)
	defer cancel()
	if err := s.opts.DB.Ping(ctx); err != nil {
		s.opts.Logger.Warn("readiness: database unreachable", "err", err)
		return errorf(http.StatusServiceUnavailable, "database_unreachable", "The database does not answer; the server cannot serve requests yet.")
	}
	return c.JSON(fiber.Map{"status": "ready"})
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
	level := s.opts.Logger.Debug
	if status >= 500 {
		level = s.opts.Logger.Warn
	}
	level("request", "method", c.Method(), "path", c.Path(), "status", status, "took", time.Since(start))
	return nil
}
