package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

func (s *Server) mountWorkspacePages(me guard) {
	me.Get("/workspaces", s.pageWorkspaces)
	me.Post("/workspaces", s.postPageWorkspace)
	me.Get("/workspaces/:id", s.pageWorkspace)
	me.Post("/workspaces/:id/rename", s.postPageRenameWorkspace)
	me.Get("/workspaces/:id/delete", s.pageDeleteWorkspace)
	me.Post("/workspaces/:id/delete", s.postPageDeleteWorkspace)
	me.Post("/workspaces/:id/tokens", s.postPageToken)
	me.Post("/workspaces/:id/tokens/:tokenId/revoke", s.postPageRevokeToken)
	me.Post("/workspaces/:id/tasks", s.postPageTask)
	me.Get("/tasks/:id", s.pageTask)
	me.Post("/tasks/:id", s.postPageUpdateTask)
}

func (s *Server) workspacesView(c *fiber.Ctx) (view, error) {
	ws, err := s.opts.DB.Workspaces(c.UserContext(), userID(c))
	if err != nil {
		return view{}, err
	}
	return view{Title: "Workspaces", Nav: "workspaces", Src: "/workspaces", User: s.pageUser(c), Data: fiber.Map{"Workspaces": ws}}, nil
}

func (s *Server) pageWorkspaces(c *fiber.Ctx) error {
	v, err := s.workspacesView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "workspaces", v)
}

func (s *Server) postPageWorkspace(c *fiber.Ctx) error {
	name, err := cleanName("name", c.FormValue("name"))
	var w *store.Workspace
	if err == nil {
		w, err = s.createWorkspace(c.UserContext(), userID(c), name)
	}
	if err != nil {
		// a name refused, or the person's cap: said at the form
		v, verr := s.workspacesView(c)
		if verr != nil {
			return verr
		}
		v.Data["Name"] = c.FormValue("name")
		return s.formFailed(c, "workspaces", v, err)
	}
	return c.Redirect("/workspaces/"+w.ID, http.StatusSeeOther)
}

// workspaceView loads one of the person's workspaces with its tokens and
// tasks; another person's workspace is not found.
func (s *Server) workspaceView(c *fiber.Ctx) (view, error) {
	uid := userID(c)
	w, err := s.opts.DB.Workspace(c.UserContext(), uid, c.Params("id"))
	if err != nil {
		return view{}, storeError(err, "workspace")
	}
	toks, err := s.opts.DB.AgentTokens(c.UserContext(), uid, w.ID)
	if err != nil {
		return view{}, storeError(err, "workspace")
	}
	before, err := taskCursor("tasks_before", c.Query("tasks_before"))
	if err != nil {
		return view{}, err
	}
	tasks, older, err := taskPage(func(b string, n int) ([]store.Task, error) { return s.opts.DB.Tasks(c.UserContext(), uid, w.ID, b, n) }, before, tasksShown)
	if err != nil {
		return view{}, storeError(err, "workspace")
	}
	clients, err := s.opts.DB.OAuthGrants(c.UserContext(), uid, w.ID)
	if err != nil {
		return view{}, storeError(err, "workspace")
	}
	src := "/workspaces/" + w.ID
	if before != "" {
		src += "?tasks_before=" + before // live updates keep the page of tasks shown
	}
	return view{Title: w.Name, Nav: "workspaces", Src: src, User: s.pageUser(c),
		Data: fiber.Map{"Workspace": w, "Tokens": toks, "Tasks": tasks, "OlderTasks": older, "TasksFrom": before, "Statuses": store.TaskStatuses,
			"Clients": clients, "Connect": s.connectSnippets(), "Notice": revokedNotice(c.Query("revoked")),
			"Expiries": tokenExpiries}}, nil
}

// connectSnippets are what the workspace page offers to paste: the MCP
// address itself (kept on the page, not only in a token's one-time card),
// the commands for Claude Code and Codex, and a JSON config for any other
// client that reads the usual "mcpServers" shape.
func (s *Server) connectSnippets() fiber.Map {
	m := s.mcpOAuthCommands()
	u := s.opts.PublicURL + "/mcp"
	m["URL"] = u
	m["JSON"] = "{\n  \"mcpServers\": {\n    \"tabbridge\": {\n      \"type\": \"http\",\n      \"url\": \"" + u + "\"\n    }\n  }\n}"
	return m
}

// tokenExpiries are the choices the token form offers, in days (0: never).
var tokenExpiries = []struct {
	Days  int
	Label string
}{{0, "Never"}, {7, "In 7 days"}, {30, "In 30 days"}, {90, "In 90 days"}, {365, "In a year"}}

// tokenExpiry reads the token form's expiry: nil for never, else that many
// days from now; any other value is refused.
func tokenExpiry(v string) (*time.Time, error) {
	if v == "" || v == "0" {
		return nil, nil
	}
	for _, e := range tokenExpiries {
		if strconv.Itoa(e.Days) == v {
			at := store.Now().Add(time.Duration(e.Days) * 24 * time.Hour)
			return &at, nil
		}
	}
	return nil, errorf(http.StatusBadRequest, codeInvalidExpiry, "Choose when the token expires from the list: never, or in 7, 30, 90 or 365 days.")
}

// ifQuery is notice when the address carries ?key=1 (set by the redirect
// after a revoke), so the page says the revoke happened.
func ifQuery(c *fiber.Ctx, key, notice string) string {
	if c.Query(key) == "1" {
		return notice
	}
	return ""
}

// revokedNotice says what a revoke on this page just did (the redirect
// after it names the kind).
func revokedNotice(kind string) string {
	switch kind {
	case "token":
		return "Token revoked: an agent using it is refused from its next request."
	case "client":
		return "App disconnected: its access ends now; it must be allowed again to come back."
	}
	return ""
}

func (s *Server) pageWorkspace(c *fiber.Ctx) error {
	v, err := s.workspaceView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "workspace", v)
}

// workspaceFormFailed shows the workspace page again with a form's error and
// the value typed into it (field names the form).
func (s *Server) workspaceFormFailed(c *fiber.Ctx, field string, err error) error {
	v, verr := s.workspaceView(c)
	if verr != nil {
		return verr
	}
	v.Data[field] = c.FormValue(field)
	v.Data["Failed"] = field
	return s.formFailed(c, "workspace", v, err)
}

func (s *Server) postPageRenameWorkspace(c *fiber.Ctx) error {
	name, err := cleanName("name", c.FormValue("name"))
	if err != nil {
		return s.workspaceFormFailed(c, "name", err)
	}
	w, err := s.renameWorkspace(c.UserContext(), userID(c), c.Params("id"), name)
	if err != nil {
		return storeError(err, "workspace")
	}
	return c.Redirect("/workspaces/"+w.ID, http.StatusSeeOther)
}

func (s *Server) pageDeleteWorkspace(c *fiber.Ctx) error {
	w, err := s.opts.DB.Workspace(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "workspace")
	}
	return s.render(c, http.StatusOK, "workspace_delete", view{Title: "Delete " + w.Name, Nav: "workspaces",
		Src: "/workspaces/" + w.ID + "/delete", User: s.pageUser(c), Data: fiber.Map{"Workspace": w}})
}

func (s *Server) postPageDeleteWorkspace(c *fiber.Ctx) error {
	if err := s.removeWorkspace(c, userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.Redirect("/workspaces", http.StatusSeeOther)
}

// postPageToken creates an agent token and shows its secret, with the
// command that connects Claude Code, this once.
func (s *Server) postPageToken(c *fiber.Ctx) error {
	name, err := cleanName("name", c.FormValue("tokenName"))
	if err != nil {
		return s.workspaceFormFailed(c, "tokenName", err)
	}
	expires, err := tokenExpiry(c.FormValue("expiresIn"))
	if err != nil {
		return s.workspaceFormFailed(c, "tokenName", err)
	}
	tok, plain, err := s.createAgentToken(c.UserContext(), userID(c), c.Params("id"), name, expires)
	if isLimit(err) {
		return s.workspaceFormFailed(c, "tokenName", err)
	}
	if err != nil {
		return storeError(err, "workspace")
	}
	v, err := s.workspaceView(c)
	if err != nil {
		return err
	}
	v.Data["NewToken"] = tok
	v.Data["NewSecret"] = plain
	v.Data["MCPCommand"] = s.mcpCommand(name, plain)
	return s.render(c, http.StatusCreated, "workspace", v)
}

func (s *Server) postPageRevokeToken(c *fiber.Ctx) error {
	if err := s.revokeToken(c, userID(c), c.Params("id"), c.Params("tokenId")); err != nil {
		return err
	}
	return c.Redirect("/workspaces/"+c.Params("id")+"?revoked=token", http.StatusSeeOther)
}

func (s *Server) postPageTask(c *fiber.Ctx) error {
	in := taskBody{Title: c.FormValue("title")}
	if err := in.validate(true); err != nil {
		return s.workspaceFormFailed(c, "title", err)
	}
	w, err := s.opts.DB.Workspace(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "workspace")
	}
	if _, err := s.createTask(c.UserContext(), userID(c), w.ID, in.Title, "", userID(c)); err != nil {
		return err
	}
	return c.Redirect("/workspaces/"+w.ID, http.StatusSeeOther)
}

func (s *Server) taskView(c *fiber.Ctx) (view, error) { return s.taskViewOf(c, c.Params("id")) }

// taskViewOf loads one of the person's tasks with its workspace and its
// approvals and calls in time order.
func (s *Server) taskViewOf(c *fiber.Ctx, id string) (view, error) {
	uid := userID(c)
	t, err := s.opts.DB.Task(c.UserContext(), uid, id)
	if err != nil {
		return view{}, storeError(err, "task")
	}
	w, err := s.opts.DB.Workspace(c.UserContext(), uid, t.WorkspaceID)
	if err != nil {
		return view{}, storeError(err, "task")
	}
	timeline, err := s.taskTimeline(c.UserContext(), uid, t.ID)
	if err != nil {
		return view{}, err
	}
	n, err := s.namesFor(c)
	if err != nil {
		return view{}, err
	}
	return view{Title: t.Title, Nav: "workspaces", Src: "/tasks/" + t.ID, User: s.pageUser(c),
		Data: fiber.Map{"Task": t, "Workspace": w, "Statuses": store.TaskStatuses, "ByMe": t.CreatedBy == uid,
			"Timeline": timeline, "Names": n, "Grace": s.gate.Grace().String(), "Cards": s.pendingCards(c.UserContext(), uid, timeline)}}, nil
}

func (s *Server) pageTask(c *fiber.Ctx) error {
	v, err := s.taskView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "task", v)
}

// postPageUpdateTask changes a task's title and/or status.
func (s *Server) postPageUpdateTask(c *fiber.Ctx) error {
	in := taskBody{Title: c.FormValue("title"), Status: c.FormValue("status")}
	err := in.validate(false)
	if err == nil && in.Title == "" && in.Status == "" {
		err = badRequest(codeInvalidField, "Choose a status or type a title.")
	}
	if err != nil {
		v, verr := s.taskView(c)
		if verr != nil {
			return verr
		}
		return s.formFailed(c, "task", v, err)
	}
	t, err := s.opts.DB.Task(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "task")
	}
	if t, err = s.updateTask(c.UserContext(), userID(c), t.WorkspaceID, t.ID, in.Title, in.Status, false); err != nil {
		return storeError(err, "task")
	}
	return c.Redirect("/tasks/"+t.ID, http.StatusSeeOther)
}
