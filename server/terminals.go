package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/tickets"
)

// Locals set before a terminal socket is upgraded.
const (
	localMachine = "tb.machine" // relay.Machine
	localViewer  = "tb.viewer"  // viewerGrant
)

// viewerGrant is what a redeemed viewer ticket allows.
type viewerGrant struct {
	userID, family, sessionID string // family: the sign-in that asked for the ticket
	watchOnly                 bool
	// holder is the instance holding the session's daemon, machineID its
	// machine (terminal_forward.go): another instance's viewer is forwarded.
	holder, machineID string
}

// Viewer ticket subjects are "<session id>:watch" or "<session id>:type".
const (
	modeWatch = "watch"
	modeType  = "type"
)

func (s *Server) mountTerminals(me guard) {
	me.Get("/machines", s.getMachines)
	me.Post("/machines", s.postMachine)
	me.Patch("/machines/:id", s.patchMachine)
	me.Delete("/machines/:id", s.deleteMachine)
	me.Get("/machines/:id/sessions", s.getMachineSessions)
	me.Post("/sessions/:id/viewer-ticket", s.postViewerTicket)
	s.app.Get("/ws/daemon", s.daemonGate, websocket.New(s.daemonSocket))
	s.app.Get("/ws/viewer", s.viewerGate, websocket.New(s.viewerSocket))
}

// machineView is a machine as the person sees it.
type machineView struct {
	store.Machine
	Online bool `json:"online"`
}

func (s *Server) machineView(m store.Machine) machineView {
	return machineView{Machine: m, Online: s.relay.Online(m.ID)}
}

func (s *Server) getMachines(c *fiber.Ctx) error {
	ms, err := s.opts.DB.Machines(c.UserContext(), userID(c))
	if err != nil {
		return err
	}
	out := make([]machineView, 0, len(ms))
	elsewhere := s.onlineElsewhere(c.UserContext(), userID(c))
	for _, m := range ms {
		v := s.machineView(m)
		v.Online = v.Online || elsewhere[m.ID]
		out = append(out, v)
	}
	return c.JSON(fiber.Map{"machines": out})
}

// postMachine answers with the machine's token: the only time it is shown.
func (s *Server) postMachine(c *fiber.Ctx) error {
	name, err := decodeName(c)
	if err != nil {
		return err
	}
	m, plain, err := s.createMachine(c.UserContext(), userID(c), name)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{
		"machine": s.machineView(*m), "token": plain, "command": s.daemonCommand(),
	})
}

// daemonCommand is the line that enrols a machine's daemon: it asks for the
// token on standard input and saves it in a file only this user can read,
// so the token is never on a command line (where any local user reads it).
func (s *Server) daemonCommand() string {
	return "tabbridge daemon enroll --server " + shellWord(s.opts.PublicURL)
}

func (s *Server) patchMachine(c *fiber.Ctx) error {
	name, err := decodeName(c)
	if err != nil {
		return err
	}
	m, err := s.renameMachine(c.UserContext(), userID(c), c.Params("id"), name)
	if err != nil {
		return storeError(err, "machine")
	}
	v := s.machineView(*m)
	v.Online = v.Online || s.onlineElsewhere(c.UserContext(), m.UserID)[m.ID]
	return c.JSON(fiber.Map{"machine": v})
}

// deleteMachine revokes the machine's token and closes its socket at once.
func (s *Server) deleteMachine(c *fiber.Ctx) error {
	if err := s.revokeMachine(c.UserContext(), userID(c), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// revokeMachine revokes one of a person's machines and ends its daemon's
// socket: the linked one (Disconnect) and one admitted before the revoke but
// not linked yet (the follower ends it, or it finds the machine revoked).
func (s *Server) revokeMachine(ctx context.Context, uid, id string) error {
	if err := s.opts.DB.RevokeMachine(ctx, uid, id); err != nil {
		return storeError(err, "machine")
	}
	s.machines.end(id)
	s.relay.Disconnect(id)
	s.publish(uid, evMachineRevoked, fiber.Map{"machine": fiber.Map{"id": id}})
	return nil
}

func (s *Server) getMachineSessions(c *fiber.Ctx) error {
	m, err := s.opts.DB.Machine(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "machine")
	}
	return c.JSON(fiber.Map{"sessions": s.machineSessions(c.UserContext(), m.UserID, m.ID)})
}

type viewerTicketBody struct {
	WatchOnly bool `json:"watchOnly"`
}

// postViewerTicket issues a one-minute ticket bound to one session and
// mode: the viewer socket it opens can see and type into that session only.
func (s *Server) postViewerTicket(c *fiber.Ctx) error {
	var in viewerTicketBody
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	sess, err := s.findSession(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return notFound("session")
	}
	mode := modeType
	if in.WatchOnly {
		mode = modeWatch
	}
	plain, exp, err := s.tickets.Issue(c.UserContext(), userID(c), familyID(c), tickets.PurposeViewer, sess.ID+":"+mode)
	if err != nil {
		return ticketError(err)
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{
		"ticket": plain, "expiresAt": exp, "url": "/ws/viewer?ticket=" + plain, "watchOnly": in.WatchOnly,
	})
}

var errMachineTokenInvalid = errorf(http.StatusUnauthorized, codeMachineTokenInvalid,
	"This machine token is unknown or revoked; create a new machine in the web app and enroll the daemon with its token.")

// daemonGate admits a daemon by its machine token before the upgrade, so a
// refused token gets a plain 401 the daemon can tell apart from an outage.
func (s *Server) daemonGate(c *fiber.Ctx) error {
	tok, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return errorf(http.StatusUnauthorized, codeMachineTokenRequired,
			"Send the machine token as 'Authorization: Bearer tbm_…'; a person creates one under Machines in the web app.")
	}
	m, err := s.opts.DB.AuthenticateMachine(c.UserContext(), strings.TrimSpace(tok))
	if errors.Is(err, store.ErrNotFound) {
		return errMachineTokenInvalid
	}
	if err != nil {
		return err
	}
	// Nothing but a real dial claims the machine for an install.
	if !websocket.IsWebSocketUpgrade(c) {
		return errorf(http.StatusUpgradeRequired, codeWebsocketRequired, "This endpoint is a WebSocket; connect with the tabbridge daemon.")
	}
	install := c.Get(wire.InstallHeader)
	if !wire.ValidInstallID(install) {
		return errorf(http.StatusBadRequest, codeInstallIDRequired,
			"Send this install's id as '%s' (%d to %d printable characters); 'tabbridge daemon enroll' writes one beside the token.",
			wire.InstallHeader, wire.MinInstallID, wire.MaxInstallID)
	}
	switch err := s.opts.DB.ClaimMachine(c.UserContext(), m, install); {
	case errors.Is(err, store.ErrOtherInstall):
		s.publish(m.UserID, evMachineUpdated, fiber.Map{"machine": s.machineView(*m)})
		return errorf(http.StatusConflict, codeMachineOtherInstall,
			"This machine token is already used by the daemon of another install, so this one was not linked, and the person is told on the Machines page. "+
				"To connect this computer, create a new machine in the web app and enroll with its token.")
	case errors.Is(err, store.ErrNotFound):
		return errMachineTokenInvalid
	case err != nil:
		return err
	}
	daemonAdmitted(m.ID)
	c.Locals(localMachine, relay.Machine{ID: m.ID, UserID: m.UserID})
	// The 101 names what this server takes beyond the first protocol, so a
	// newer daemon sends nothing an older server would close the link on.
	c.Set(wire.FeaturesHeader, wire.FeatureRefused)
	return c.Next()
}

func (s *Server) daemonSocket(conn *websocket.Conn) {
	m, _ := conn.Locals(localMachine).(relay.Machine)
	ctx, stop := s.machines.follow(context.Background(), m.ID) // revoking the machine ends the link
	defer stop()
	s.opts.Logger.Info("daemon linked", "machine", m.ID, "user", m.UserID)
	err := s.relay.ServeDaemon(ctx, m, conn.Conn)
	s.opts.Logger.Info("daemon gone", "machine", m.ID, "user", m.UserID, "err", err)
	if err := s.opts.DB.TouchMachine(s.ctx, m.ID); err != nil && s.ctx.Err() == nil {
		s.opts.Logger.Warn("touch machine", "err", err)
	}
}

// viewerGate admits a viewer by its ticket, from the server's own origin or
// a trusted extension's. The upgrade and the Origin are checked before the
// ticket is redeemed, so only a real dial spends it: a plain GET, or a page
// that may not open the socket, leaves it for the dial that follows.
func (s *Server) viewerGate(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return errorf(http.StatusUpgradeRequired, codeWebsocketRequired,
			"This endpoint is a WebSocket: dial it with ?ticket=…; only a dial that upgrades spends the ticket.")
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin != s.publicOrigin() && !s.extensionOrigin(origin) {
		return errorf(http.StatusForbidden, codeOriginNotAllowed,
			"Viewer sockets open only from %s or the Tabbridge extension; this one came from %q.", s.publicOrigin(), origin)
	}
	t, err := s.tickets.Redeem(c.UserContext(), c.Query("ticket"), tickets.PurposeViewer)
	if errors.Is(err, tickets.ErrInvalid) {
		return errorf(http.StatusUnauthorized, codeTicketInvalid,
			"This viewer ticket is unknown, used or expired; ask for a new one (POST /api/sessions/:id/viewer-ticket) and connect within a minute.")
	}
	if errors.Is(err, tickets.ErrSignedOut) {
		return errTicketSignedOut()
	}
	if err != nil {
		return err
	}
	redeemed()
	sid, mode, _ := strings.Cut(t.Subject, ":")
	sess, err := s.findSession(c.UserContext(), t.UserID, sid)
	if err != nil {
		return notFound("session")
	}
	c.Locals(localViewer, viewerGrant{userID: t.UserID, family: t.FamilyID, sessionID: sid, watchOnly: mode != modeType,
		holder: sess.holder, machineID: sess.MachineID})
	return c.Next()
}

func (s *Server) viewerSocket(conn *websocket.Conn) {
	g, _ := conn.Locals(localViewer).(viewerGrant)
	ctx, stop := s.signins.follow(context.Background(), g.family) // signing out ends the viewer
	defer stop()
	var err error
	if g.holder != s.id {
		err = s.forwardViewer(ctx, g, conn.Conn)
	} else {
		err = s.relay.ServeViewer(ctx, g.userID, g.sessionID, g.watchOnly, conn.Conn)
	}
	s.opts.Logger.Debug("viewer socket closed", "session", g.sessionID, "err", err)
}
