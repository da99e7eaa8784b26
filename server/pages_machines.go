package server

import (
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// The machines pages: each machine with its daemon's state and sessions,
// creating one (its token shown once with the command that connects it),
// renaming and revoking; and the live terminal of one session.
func (s *Server) mountMachinePages(me guard) {
	me.Get("/machines", s.pageMachines)
	me.Post("/machines", s.postPageMachine)
	me.Post("/machines/:id/rename", s.postPageRenameMachine)
	me.Get("/machines/:id/revoke", s.pageRevokeMachine)
	me.Post("/machines/:id/revoke", s.postPageRevokeMachine)
	me.Get("/sessions/:id", s.pageTerminal)
}

// machineRow is a machine on the machines page with its sessions.
type machineRow struct {
	machineView
	Sessions []relay.SessionView
}

func (s *Server) machinesView(c *fiber.Ctx) (view, error) {
	ms, err := s.opts.DB.Machines(c.UserContext(), userID(c))
	if err != nil {
		return view{}, err
	}
	rows := make([]machineRow, 0, len(ms))
	elsewhere := s.onlineElsewhere(c.UserContext(), userID(c)) // terminal_forward.go
	for _, m := range ms {
		v := s.machineView(m)
		v.Online = v.Online || elsewhere[m.ID]
		rows = append(rows, machineRow{v, s.machineSessions(c.UserContext(), m.UserID, m.ID)})
	}
	return view{Title: "Machines", Nav: "machines", Src: "/machines", User: s.pageUser(c),
		Data: fiber.Map{"Machines": rows, "Notice": ifQuery(c, "revoked",
			"Machine revoked: its token no longer works and its daemon was disconnected. To use it again, connect it anew.")}}, nil
}

func (s *Server) pageMachines(c *fiber.Ctx) error {
	v, err := s.machinesView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, "machines", v)
}

// machinesFormFailed shows the machines page again with a form's error, the
// value typed and which form it was (field, or the machine's id for rename).
func (s *Server) machinesFormFailed(c *fiber.Ctx, failed string, err error) error {
	v, verr := s.machinesView(c)
	if verr != nil {
		return verr
	}
	v.Data["Name"] = c.FormValue("name")
	v.Data["Failed"] = failed
	return s.formFailed(c, "machines", v, err)
}

// postPageMachine creates a machine and shows its token this once, with the
// enrol command that asks for it (never a command line that holds it).
func (s *Server) postPageMachine(c *fiber.Ctx) error {
	name, err := cleanName("name", c.FormValue("name"))
	if err != nil {
		return s.machinesFormFailed(c, "create", err)
	}
	m, plain, err := s.createMachine(c.UserContext(), userID(c), name)
	if isLimit(err) {
		return s.machinesFormFailed(c, "create", err)
	}
	if err != nil {
		return err
	}
	v, err := s.machinesView(c)
	if err != nil {
		return err
	}
	v.Data["NewMachine"] = m
	v.Data["NewToken"] = plain
	v.Data["DaemonCommand"] = s.daemonCommand()
	return s.render(c, http.StatusCreated, "machines", v)
}

func (s *Server) postPageRenameMachine(c *fiber.Ctx) error {
	if _, err := s.opts.DB.Machine(c.UserContext(), userID(c), c.Params("id")); err != nil {
		return storeError(err, "machine")
	}
	name, err := cleanName("name", c.FormValue("name"))
	if err != nil {
		return s.machinesFormFailed(c, c.Params("id"), err)
	}
	if _, err := s.renameMachine(c.UserContext(), userID(c), c.Params("id"), name); err != nil {
		return storeError(err, "machine")
	}
	return c.Redirect("/machines", http.StatusSeeOther)
}

func (s *Server) pageRevokeMachine(c *fiber.Ctx) error {
	m, err := s.opts.DB.Machine(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "machine")
	}
	return s.render(c, http.StatusOK, "machine_revoke", view{Title: "Revoke " + m.Name, Nav: "machines",
		Src: "/machines/" + m.ID + "/revoke", User: s.pageUser(c),
		Data: fiber.Map{"Machine": s.machineView(*m), "Sessions": len(s.relay.Sessions(m.ID))}})
}

// postPageRevokeMachine revokes the token and closes the daemon's socket.
func (s *Server) postPageRevokeMachine(c *fiber.Ctx) error {
	if err := s.revokeMachine(c.UserContext(), userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.Redirect("/machines?revoked=1", http.StatusSeeOther)
}

// terminalCSP is the terminal page's policy: the app's, except that styles
// may also be inline. xterm.js's DOM renderer writes its colours and cell
// sizes into <style> elements it creates and style attributes, with no way to
// pass a nonce; scripts stay 'self' only.
const terminalCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors "

// pageTerminal shows one of the person's sessions live; its script asks for
// a viewer ticket and dials the viewer socket.
func (s *Server) pageTerminal(c *fiber.Ctx) error {
	sess, err := s.findSession(c.UserContext(), userID(c), c.Params("id")) // here or on the instance holding its daemon
	if err != nil {
		return notFound("session")
	}
	m, err := s.opts.DB.Machine(c.UserContext(), userID(c), sess.MachineID)
	if err != nil {
		return storeError(err, "session")
	}
	title := strings.Join(sess.Command, " ")
	// No Src: app.js would re-fetch the page on every event-stream
	// reconnect and, while a restarted server waits for the daemon to
	// announce the session again, replace the terminal with a 404. Without
	// one, app.js swaps only the nav (its Inbox count) and ignores a failed
	// fetch.
	if err := s.render(c, http.StatusOK, "session", view{Title: title, Nav: "machines",
		User: s.pageUser(c), Data: fiber.Map{"Session": sess.SessionView, "Machine": m, "Command": title, "MaxInput": wire.MaxInput}}); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentSecurityPolicy, terminalCSP+s.frameAncestors())
	return nil
}
