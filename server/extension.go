package server

import (
	"context"
	"errors"
	"net/http"
	"sync"

	fws "github.com/fasthttp/websocket"
	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/tickets"
)

// startHub builds the hub of extension sockets and closes it (every socket
// with 1001, waiting for each) when Shutdown starts.
func (s *Server) startHub() {
	o := s.opts.Bridge
	o.DB, o.Catalog, o.OnChange = s.opts.DB, s.catalog, s.onHubChange
	if o.CallTimeout == 0 {
		o.CallTimeout = s.opts.CallTimeout // the welcome tells the extension what its calls get
	}
	if o.Logger == nil {
		o.Logger = s.opts.Logger
	}
	s.hub = bridge.NewHub(o)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-s.ctx.Done()
		s.hub.Close()
	}()
}

// Hub is the hub of connected browsers, for the packages wired on top of it.
func (s *Server) Hub() *bridge.Hub { return s.hub }

// socketUpgrader upgrades every extension socket. Its write buffers are
// shared: an idle socket then holds none. It is fasthttp/websocket's own, not
// gofiber/contrib/websocket's wrapper, which copies every header, query
// parameter, cookie and local of the upgrade request into maps kept for the
// socket's life (about 1.5 KB per idle browser: issue 16); the gate has
// already checked the Origin.
var socketUpgrader = fws.FastHTTPUpgrader{
	ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &sync.Pool{},
	CheckOrigin: func(*fasthttp.RequestCtx) bool { return true },
}

// mountExtension mounts the extension socket, tickets, sharing and browsers.
func (s *Server) mountExtension(web guard) {
	s.app.Get("/ws/extension", s.extensionGate, s.extensionUpgrade)
	me := web.with(s.person)
	me.Post("/tickets", s.postTicket)
	me.Get("/sites", s.getSites)
	me.Post("/sites", s.postSite)
	me.Delete("/sites/:id", s.deleteSite)
	me.Patch("/sites/:id", s.patchSite)
	me.Get("/browsers", s.getBrowsers)
	me.Patch("/browsers/:id", s.patchBrowser)
}

// extensionGate admits an extension socket before the upgrade, so every
// refusal is a plain HTTP answer in the one error shape: 403 for an Origin
// that is not a trusted extension's (checked first, so a refused page cannot
// spend a ticket), 401 for a missing, used, expired or foreign ticket.
func (s *Server) extensionGate(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return errorf(http.StatusUpgradeRequired, codeWebsocketRequired, "This is the extension's WebSocket endpoint; open it as a WebSocket with ?ticket=… (docs/PROTOCOL.md).")
	}
	if origin := c.Get(fiber.HeaderOrigin); !s.extensionOrigin(origin) {
		return errorf(http.StatusForbidden, codeOriginNotAllowed, "Only the Tabbridge extension may open this socket; origin %q is not an allowed extension.", origin)
	}
	if !s.hub.Accepting() {
		return fiber.ErrServiceUnavailable
	}
	tok := c.Query("ticket")
	if tok == "" {
		return errorf(http.StatusUnauthorized, codeTicketRequired, "Ask for a ticket with POST /api/tickets, then open the socket with ?ticket=<ticket>.")
	}
	t, err := s.tickets.Redeem(c.UserContext(), tok, tickets.PurposeExtension)
	if errors.Is(err, tickets.ErrInvalid) {
		return errorf(http.StatusUnauthorized, codeTicketInvalid, "This ticket is unknown, used, expired or for something else; ask for a new one with POST /api/tickets.")
	}
	if errors.Is(err, tickets.ErrSignedOut) {
		return errTicketSignedOut()
	}
	if err != nil {
		return err
	}
	redeemed()
	c.Locals(localUser, t.UserID)
	c.Locals(localFamily, t.FamilyID)
	return c.Next()
}

// errTicketSignedOut refuses a ticket whose sign-in ended after it was asked
// for: the person signed out, so nothing it was about to open opens.
func errTicketSignedOut() error {
	return errorf(http.StatusUnauthorized, codeSignedOut,
		"The sign-in that asked for this ticket has ended (signed out); sign in again, then ask for a new ticket.")
}

// extensionUpgrade upgrades an admitted request to the extension socket.
func (s *Server) extensionUpgrade(c *fiber.Ctx) error {
	uid, _ := c.Locals(localUser).(string)
	family, _ := c.Locals(localFamily).(string)
	fctx := c.Context()
	err := socketUpgrader.Upgrade(fctx, func(conn *fws.Conn) {
		defer func() { _ = recover() }() // bridge.Hub.Serve recovers itself; nothing else may end the server
		// fasthttp keeps the upgrade's RequestCtx until the socket ends, and
		// with it every header, cookie and query argument the middleware
		// parsed and the response headers it set (~4 KB per idle browser,
		// issue 16). Nothing reads them once the connection is hijacked:
		// fasthttp has written the 101 and touches the ctx again only to
		// release it (a zero Request and Response are valid then).
		fctx.Request = fasthttp.Request{}
		fctx.Response = fasthttp.Response{}
		s.extensionSocket(conn, uid, family)
	})
	if err != nil {
		return fiber.ErrUpgradeRequired
	}
	return nil
}

// extensionSocket hands the upgraded socket to the hub until it ends or the
// sign-in that asked for its ticket does; Serve returns only after its
// writer has stopped, so the Conn is never written late.
func (s *Server) extensionSocket(c *fws.Conn, uid, family string) {
	// The follower's database check runs off this goroutine, which goes on
	// to be the socket's reader: the stack it grew would stay for the
	// socket's life (bridge.OffStack).
	var ctx context.Context
	var stop context.CancelFunc
	bridge.OffStack(func() { ctx, stop = s.signins.follow(context.Background(), family) })
	defer stop()
	s.hub.Serve(ctx, c, uid)
}

// ticketError answers a ticket refused because the person holds
// tickets.MaxUnspent (429 too_many_tickets); any other error as it is.
func ticketError(err error) error {
	if errors.Is(err, tickets.ErrTooMany) {
		return errorf(http.StatusTooManyRequests, codeTooManyTickets,
			"You already hold %d unspent tickets from the last minute, the most at once. Each is spent when a socket opens with it "+
				"and expires after %s: open the sockets you asked tickets for, or wait, then ask again.", tickets.MaxUnspent, tickets.TTL)
	}
	return err
}

type ticketBody struct {
	Purpose string `json:"purpose"`
}

// postTicket trades the sign-in cookie for a one-minute, single-use ticket
// that opens the extension socket.
func (s *Server) postTicket(c *fiber.Ctx) error {
	var in ticketBody
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &in); err != nil {
			return err
		}
	}
	if in.Purpose != "" && in.Purpose != tickets.PurposeExtension {
		return badRequest(codeInvalidField, "Field \"purpose\" must be %q (or left out).", tickets.PurposeExtension)
	}
	tok, exp, err := s.tickets.Issue(c.UserContext(), userID(c), familyID(c), tickets.PurposeExtension, "")
	if err != nil {
		return ticketError(err)
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"ticket": tok, "expiresAt": exp, "purpose": tickets.PurposeExtension})
}
