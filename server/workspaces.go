package server

import (
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

func (s *Server) mountWorkspaces(me guard) {
	me.Get("/workspaces", s.getWorkspaces)
	me.Post("/workspaces", s.postWorkspace)
	me.Get("/workspaces/:id", s.getWorkspace)
	me.Patch("/workspaces/:id", s.patchWorkspace)
	me.Delete("/workspaces/:id", s.deleteWorkspace)
	me.Get("/workspaces/:id/tokens", s.getAgentTokens)
	me.Post("/workspaces/:id/tokens", s.postAgentToken)
	me.Delete("/workspaces/:id/tokens/:tokenId", s.deleteAgentToken)
	me.Get("/workspaces/:id/tasks", s.getTasks)
	me.Post("/workspaces/:id/tasks", s.postTask)
	me.Get("/tasks/:id", s.getTask)
	me.Patch("/tasks/:id", s.patchTask)
}

func (s *Server) getWorkspaces(c *fiber.Ctx) error {
	ws, err := s.opts.DB.Workspaces(c.UserContext(), userID(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"workspaces": ws})
}

func (s *Server) postWorkspace(c *fiber.Ctx) error {
	name, err := decodeName(c)
	if err != nil {
		return err
	}
	w, err := s.createWorkspace(c.UserContext(), userID(c), name)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"workspace": w})
}

func (s *Server) getWorkspace(c *fiber.Ctx) error {
	w, err := s.opts.DB.Workspace(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "workspace")
	}
	return c.JSON(fiber.Map{"workspace": w})
}

func (s *Server) patchWorkspace(c *fiber.Ctx) error {
	name, err := decodeName(c)
	if err != nil {
		return err
	}
	w, err := s.renameWorkspace(c.UserContext(), userID(c), c.Params("id"), name)
	if err != nil {
		return storeError(err, "workspace")
	}
	return c.JSON(fiber.Map{"workspace": w})
}

func (s *Server) deleteWorkspace(c *fiber.Ctx) error {
	if err := s.removeWorkspace(c, userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// removeWorkspace deletes one of uid's workspaces with its tokens, tasks and
// shared sites — for the API and the page alike — and stops what hung on
// them: its agents' running calls and MCP sessions (revoke.go), the sites'
// live tools and waiting requests, and the site list the person's browsers
// hold.
func (s *Server) removeWorkspace(c *fiber.Ctx, uid, id string) error {
	sites, err := s.opts.DB.WorkspaceSites(c.UserContext(), id)
	if err != nil {
		return err
	}
	agents, err := s.opts.DB.WorkspaceAgents(c.UserContext(), id)
	if err != nil {
		return err
	}
	if err := s.opts.DB.DeleteWorkspace(c.UserContext(), uid, id); err != nil {
		return storeError(err, "workspace")
	}
	s.workspaceAgentsGone(agents)
	for _, site := range sites {
		if site.UserID != uid {
			continue
		}
		s.catalog.ForgetSite(uid, site.Origin)
		if err := s.gate.ForgetSite(c.UserContext(), uid, "", site.Origin); err != nil {
			return err
		}
	}
	s.publish(uid, evWorkspaceDeleted, fiber.Map{"workspace": fiber.Map{"id": id}})
	s.pushSites(c, uid)
	return nil
}

func (s *Server) getAgentTokens(c *fiber.Ctx) error {
	toks, err := s.opts.DB.AgentTokens(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "workspace")
	}
	return c.JSON(fiber.Map{"tokens": toks})
}

// postAgentToken answers with the token's secret: the only time it is shown.
func (s *Server) postAgentToken(c *fiber.Ctx) error {
	var in struct {
		Name          string `json:"name"`
		ExpiresInDays int    `json:"expiresInDays"` // 0: never; else one of tokenExpiries
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	name, err := cleanName("name", in.Name)
	if err != nil {
		return err
	}
	expires, err := tokenExpiry(strconv.Itoa(in.ExpiresInDays))
	if err != nil {
		return err
	}
	tok, plain, err := s.createAgentToken(c.UserContext(), userID(c), c.Params("id"), name, expires)
	if err != nil {
		return storeError(err, "workspace")
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{
		"token": tok, "secret": plain,
		"mcpCommand": s.mcpCommand(name, plain),
	})
}

// mcpCommand is the ready-to-paste line that adds this server to Claude Code.
func (s *Server) mcpCommand(name, token string) string {
	return "claude mcp add --transport http " + shellWord(mcpName(name)) + " " + s.opts.PublicURL + "/mcp --header " +
		shellWord("Authorization: Bearer "+token)
}

func (s *Server) deleteAgentToken(c *fiber.Ctx) error {
	if err := s.revokeToken(c, userID(c), c.Params("id"), c.Params("tokenId")); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// revokeToken revokes an agent token of one of uid's workspaces (API and
// page alike), ends what its agent started (revoke.go), and tells the
// person's pages.
func (s *Server) revokeToken(c *fiber.Ctx, uid, workspaceID, tokenID string) error {
	if err := s.opts.DB.RevokeAgentToken(c.UserContext(), uid, workspaceID, tokenID); err != nil {
		return storeError(err, "agent token")
	}
	s.tokenRevoked(tokenID)
	s.publish(uid, evTokenRevoked, fiber.Map{"token": fiber.Map{"id": tokenID, "workspaceId": workspaceID}})
	return nil
}

type taskBody struct {
	Title  string `json:"title"`
	Status string `json:"status"`
}

func (in *taskBody) validate(requireTitle bool) error {
	if requireTitle || in.Title != "" {
		t, err := cleanName("title", in.Title)
		if err != nil {
			return err
		}
		in.Title = t
	}
	if in.Status != "" && !store.ValidTaskStatus(in.Status) {
		return badRequest(codeInvalidField, "Field \"status\" must be one of %v.", store.TaskStatuses)
	}
	return nil
}

func (s *Server) postTask(c *fiber.Ctx) error {
	var in taskBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := in.validate(true); err != nil {
		return err
	}
	w, err := s.opts.DB.Workspace(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "workspace")
	}
	t, err := s.createTask(c.UserContext(), userID(c), w.ID, in.Title, in.Status, userID(c))
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"task": t})
}

func (s *Server) getTask(c *fiber.Ctx) error {
	t, err := s.opts.DB.Task(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "task")
	}
	return c.JSON(fiber.Map{"task": t})
}

func (s *Server) patchTask(c *fiber.Ctx) error {
	var in taskBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := in.validate(false); err != nil {
		return err
	}
	if in.Title == "" && in.Status == "" {
		return badRequest(codeInvalidField, "Send \"title\", \"status\" or both.")
	}
	t, err := s.opts.DB.Task(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "task")
	}
	t, err = s.updateTask(c.UserContext(), userID(c), t.WorkspaceID, t.ID, in.Title, in.Status, false)
	if err != nil {
		return storeError(err, "task")
	}
	return c.JSON(fiber.Map{"task": t})
}

// agentWorkspace tells an agent which workspace its token belongs to.
func (s *Server) agentWorkspace(c *fiber.Ctx) error {
	id := agentID(c)
	return c.JSON(fiber.Map{"workspace": id.Workspace})
}
