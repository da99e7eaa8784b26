package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/store"
)

// The error codes, one constant each: a program keys on the code, so it
// never changes once shipped. docs/API.md's table of error codes lists each
// (TestErrorCodesAreDocumented checks both ways).
const (
	codeAccessExpired        = "access_expired"
	codeAccessTokenInvalid   = "access_token_invalid"
	codeAgentGone            = "agent_gone"
	codeAgentTokenExpired    = "agent_token_expired"
	codeAgentTokenInvalid    = "agent_token_invalid"
	codeAgentTokenNotAllowed = "agent_token_not_allowed"
	codeAgentTokenRequired   = "agent_token_required"
	codeBadCredentials       = "bad_credentials"
	codeBodyTooLarge         = "body_too_large"
	codeConflict             = "conflict"
	codeCookieNotAllowed     = "cookie_not_allowed"
	codeCSRFOrigin           = "csrf_origin"
	codeCSRFToken            = "csrf_token"
	codeDatabaseUnreachable  = "database_unreachable"
	codeEmailTaken           = "email_taken"
	codeEmptyBody            = "empty_body"
	codeHeaderRepeated       = "header_repeated"
	codeHTTPError            = "http_error"
	codeInstallIDRequired    = "install_id_required"
	codeInternal             = "internal"
	// codeInternalUnauthorized: the internal listener without the internal secret.
	codeInternalUnauthorized = "internal_unauthorized"
	codeInvalidExpiry        = "invalid_expiry"
	codeInvalidField         = "invalid_field"
	codeInvalidJSON          = "invalid_json"
	codeInvalidOrigin        = "invalid_origin"
	codeInvalidRequest       = "invalid_request"
	codeInvitationInvalid    = "invitation_invalid"
	codeLimitReached         = "limit_reached"
	codeMachineOtherInstall  = "machine_other_install"
	codeMachineTokenInvalid  = "machine_token_invalid"
	codeMachineTokenRequired = "machine_token_required"
	codeMethodNotAllowed     = "method_not_allowed"
	codeMetricsLocalOnly     = "metrics_local_only"
	codeMoreCalls            = "more_calls"
	codeNoRoute              = "no_route"
	codeNoStandingGrant      = "no_standing_grant"
	codeNotFound             = "not_found"
	codeNotPending           = "not_pending"
	codeNotRemembered        = "not_remembered"
	codeOriginNotAllowed     = "origin_not_allowed"
	codeOwnerExists          = "owner_exists"
	codeOwnerOnly            = "owner_only"
	codeRateLimited          = "rate_limited"
	codeRefreshReused        = "refresh_reused"
	codeRegistryStale        = "registry_stale"
	codeSignalsDown          = "signals_down"
	codeSignedOut            = "signed_out"
	codeSignupClosed         = "signup_closed"
	codeTicketInvalid        = "ticket_invalid"
	codeTicketRequired       = "ticket_required"
	codeTimeout              = "timeout"
	codeTooManyOpenTasks     = "too_many_open_tasks"
	codeTooManyTickets       = "too_many_tickets"
	codeUnavailable          = "unavailable"
	codeWebsocketRequired    = "websocket_required"
)

// apiError is the one error shape every route answers with:
//
//	{"error": {"code": "not_found", "message": "No workspace with that id."}}
//
// Code is stable for programs; Message is a sentence a person can act on.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// errorf builds an apiError.
func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// notFound is the answer for both "does not exist" and "is not yours".
func notFound(what string) *apiError {
	return errorf(http.StatusNotFound, codeNotFound, "No %s with that id.", what)
}

// storeError maps store sentinels to answers and leaves the rest for the
// error handler to log as internal.
func storeError(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(what)
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, codeConflict, "That %s already exists.", what)
	}
	return err
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(c *fiber.Ctx, e *apiError) error {
	var b errorBody
	b.Error.Code, b.Error.Message = e.Code, e.Message
	return c.Status(e.Status).JSON(b)
}

// handleError is Fiber's error handler: every error leaves as the one shape.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		s.logRefusal(c, ae)
		return writeError(c, ae)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return writeError(c, fiberError(fe))
	}
	if s.databaseDown() {
		s.logFor(c).Warn("request failed: database unreachable", "method", c.Method(), "path", c.Path(), "err", err)
		return outage(c)
	}
	s.logFor(c).Error("request failed", "method", c.Method(), "path", c.Path(), "err", err)
	return writeError(c, errorf(http.StatusInternalServerError, codeInternal, "Something went wrong on the server; try again, and report it if it keeps happening."))
}

func fiberError(fe *fiber.Error) *apiError {
	switch fe.Code {
	case http.StatusNotFound:
		return errorf(fe.Code, codeNoRoute, "There is no such endpoint; see docs/API.md.")
	case http.StatusMethodNotAllowed:
		return errorf(fe.Code, codeMethodNotAllowed, "This endpoint does not take that method; see docs/API.md.")
	case http.StatusRequestEntityTooLarge:
		return errorf(fe.Code, codeBodyTooLarge, "The request body is larger than the server accepts (%d bytes).", maxRequestBody)
	case http.StatusRequestTimeout:
		return errorf(fe.Code, codeTimeout, "The request took too long to arrive.")
	case http.StatusServiceUnavailable:
		return errorf(fe.Code, codeUnavailable, "The server is shutting down; retry in a moment.")
	}
	return errorf(fe.Code, codeHTTPError, "%s", fe.Message)
}

// logRefusal tells the operator why a request was refused: at info level for
// what an operator acts on (sign-in and token failures, forbidden origins and
// CSRF, conflicts, rate limits), at debug for the routine (an expired access
// token about to be refreshed, bad input, not found).
func (s *Server) logRefusal(c *fiber.Ctx, ae *apiError) {
	level := slog.LevelDebug
	switch {
	case ae.Code == codeAccessExpired:
	case ae.Status == http.StatusUnauthorized, ae.Status == http.StatusForbidden, ae.Status == http.StatusConflict,
		ae.Status == http.StatusTooManyRequests:
		level = slog.LevelInfo
	}
	s.opts.Logger.Log(c.UserContext(), level, "request refused", "method", c.Method(), "path", loggedPath(c.Path()), "status", ae.Status,
		"code", ae.Code, "reason", ae.Message)
}

// loggedPath is a request path fit for the log: an invitation's secret in
// /invite/{token} is cut out.
func loggedPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/invite/"); ok && rest != "" {
		return "/invite/…"
	}
	return p
}
