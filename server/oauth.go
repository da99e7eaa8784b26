package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tabbridge/tabbridge/oauth"
	"github.com/tabbridge/tabbridge/store"
)

// newOAuth builds the authorization server for /mcp from the options.
func (s *Server) newOAuth() (*oauth.Server, error) {
	var fetcher *oauth.MetadataFetcher
	if s.opts.OAuthMetadata != nil {
		fetcher = oauth.NewMetadataFetcher(*s.opts.OAuthMetadata)
	}
	return oauth.New(oauth.Options{Issuer: s.opts.PublicURL, DB: s.opts.DB, Now: s.opts.Now,
		AccessTTL: s.opts.OAuthAccessTTL, RefreshTTL: s.opts.RefreshTTL, Metadata: fetcher, NoMetadataDocuments: s.opts.OAuthNoMetadataDocuments})
}

// mountOAuth serves discovery, registration, the token and revocation
// endpoints (open to any origin: clients may run in a browser), the consent
// page (a signed-in page with CSRF protection), and the API and page actions
// that list and revoke a workspace's connected clients.
func (s *Server) mountOAuth() {
	open := guard{s.app, []fiber.Handler{s.oauthCORS}}
	for _, p := range []string{oauth.PathServerMetadata, oauth.PathOpenIDMetadata, oauth.PathRegister, oauth.PathToken, oauth.PathRevoke} {
		s.app.Options(p, s.oauthCORS)
	}
	// The protected-resource documents are served by the go-sdk's own handler.
	s.app.All(oauth.PathResourceMetadata, adaptor.HTTPHandler(auth.ProtectedResourceMetadataHandler(s.oauth.ResourceMetadata(s.opts.PublicURL))))
	s.app.All(oauth.PathResourceMetadata+oauth.PathMCP, adaptor.HTTPHandler(auth.ProtectedResourceMetadataHandler(s.oauth.ResourceMetadata(s.oauth.Resource()))))
	open.Get(oauth.PathServerMetadata, s.getServerMetadata)
	open.Get(oauth.PathOpenIDMetadata, s.getServerMetadata)
	open.Post(oauth.PathRegister, s.oauthLimit, s.postRegister)
	open.Post(oauth.PathToken, s.postToken)
	open.Post(oauth.PathRevoke, s.postRevoke)

	page := guard{s.app, []fiber.Handler{s.htmlErrors, s.ensureCSRFCookie, s.csrf, s.pageSession}}
	page.Get(oauth.PathAuthorize, s.pageAuthorize)
	page.Post(oauth.PathAuthorize, s.postAuthorize)
	page.Post("/workspaces/:id/clients/:grantId/revoke", s.postPageRevokeClient)

	api := guard{s.app.Group("/api"), []fiber.Handler{s.ensureCSRFCookie, s.csrf, s.person}}
	api.Get("/workspaces/:id/clients", s.getClients)
	api.Delete("/workspaces/:id/clients/:grantId", s.deleteClient)
}

// oauthCORS lets browser-based MCP clients read the public OAuth endpoints.
// They take no cookies, so any origin is safe.
func (s *Server) oauthCORS(c *fiber.Ctx) error {
	c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
	c.Set(fiber.HeaderAccessControlAllowMethods, "GET, POST, OPTIONS")
	c.Set(fiber.HeaderAccessControlAllowHeaders, "Content-Type, Authorization, MCP-Protocol-Version")
	if c.Method() == fiber.MethodOptions {
		return c.SendStatus(http.StatusNoContent)
	}
	return c.Next()
}

func (s *Server) getServerMetadata(c *fiber.Ctx) error { return c.JSON(s.oauth.ServerMetadata()) }

// oauthLimit is the sign-in budget (authLimiter) on an OAuth endpoint: a
// client over it is refused in the OAuth error shape, which OAuth clients
// read, not the app's, where "error" is an object they cannot parse. The
// limiter's Retry-After header says when to try again.
func (s *Server) oauthLimit(c *fiber.Ctx) error {
	err := s.authLimiter()(c)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == codeRateLimited {
		return s.oauthError(c, &oauth.Error{Status: http.StatusTooManyRequests, Code: "temporarily_unavailable",
			Description: "Too many registrations and sign-in attempts from this address; wait a minute (see Retry-After) and register again."})
	}
	return err
}

// oauthError answers in the OAuth error shape (RFC 6749 §5.2), not the
// app's: OAuth clients parse "error" and "error_description".
func (s *Server) oauthError(c *fiber.Ctx, err error) error {
	var oe *oauth.Error
	if !errors.As(err, &oe) {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(oe.Status).JSON(oe)
}

func (s *Server) postRegister(c *fiber.Ctx) error {
	resp, err := s.oauth.Register(c.UserContext(), c.Body())
	if err != nil {
		return s.oauthError(c, err)
	}
	s.opts.Logger.Info("oauth client registered", "client", resp.ClientName)
	return c.Status(http.StatusCreated).JSON(resp)
}

func (s *Server) postToken(c *fiber.Ctx) error {
	form, err := url.ParseQuery(string(c.Body()))
	if err != nil || !strings.HasPrefix(c.Get(fiber.HeaderContentType), fiber.MIMEApplicationForm) {
		return s.oauthError(c, &oauth.Error{Status: http.StatusBadRequest, Code: "invalid_request",
			Description: "Send the token request as application/x-www-form-urlencoded (RFC 6749 §4.1.3)."})
	}
	if name := repeatedParam(form); name != "" {
		return s.oauthError(c, &oauth.Error{Status: http.StatusBadRequest, Code: "invalid_request",
			Description: fmt.Sprintf("The parameter %s is given more than once; send each parameter once (RFC 6749 §3.2).", name)})
	}
	resp, g, err := s.oauth.Token(c.UserContext(), form)
	var oe *oauth.Error
	if errors.As(err, &oe) && oe.Revoked != "" {
		s.opts.Logger.Warn("oauth code or refresh token presented again; its grant is revoked", "grant", oe.Revoked, "grant_type", form.Get("grant_type"))
		s.grantRevoked(oe.Revoked)
	}
	if err != nil {
		return s.oauthError(c, err)
	}
	if form.Get("grant_type") == "authorization_code" { // a new connected app: the workspace page shows it
		s.publish(g.UserID, evTokenCreated, fiber.Map{"token": fiber.Map{"id": g.ID, "workspaceId": g.WorkspaceID}})
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(resp)
}

func (s *Server) postRevoke(c *fiber.Ctx) error {
	form, err := url.ParseQuery(string(c.Body()))
	if err != nil {
		return s.oauthError(c, &oauth.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "Send the revocation as a form."})
	}
	if name := repeatedParam(form); name != "" {
		return s.oauthError(c, &oauth.Error{Status: http.StatusBadRequest, Code: "invalid_request",
			Description: fmt.Sprintf("The parameter %s is given more than once; send each parameter once.", name)})
	}
	id, err := s.oauth.Revoke(c.UserContext(), form)
	if err != nil {
		return s.oauthError(c, err)
	}
	if id != "" {
		s.grantRevoked(id)
	}
	return c.SendStatus(http.StatusOK)
}

// pageAuthorize is the consent page: which client asks (name and host),
// for which workspace, allow or deny. A request whose client or redirect URI
// is wrong is shown as an error here and never redirected.
func (s *Server) pageAuthorize(c *fiber.Ctx) error {
	q, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return badRequest(codeInvalidRequest, "The authorization request's parameters cannot be read.")
	}
	if name := repeatedParam(q); name != "" {
		return badRequest(codeInvalidRequest, "This sign-in request from an app cannot go on: its parameter %s is given more than once, "+
			"so parts of the way could read different ones (RFC 6749 §3.1). Tell the app, or close this page.", name)
	}
	return s.authorizeFrom(c, q)
}

// repeatedParam is the first parameter of an OAuth request given more than
// once, or "". RFC 6749 forbids it (§3.1, §3.2): url.Values.Get reads the
// first of two client_id or code parameters, a proxy or log the last, and a
// request read two ways is what an attacker wants. (Sorted, for a stable
// answer.)
func repeatedParam(q url.Values) string {
	names := make([]string, 0, len(q))
	for k, vs := range q {
		if len(vs) > 1 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func (s *Server) authorizeFrom(c *fiber.Ctx, q url.Values) error {
	req, err := s.oauth.ParseAuthorize(c.UserContext(), q)
	var re *oauth.RedirectError
	if errors.As(err, &re) && c.Method() == fiber.MethodPost {
		return s.redirectToClient(c, re.URL)
	}
	if errors.As(err, &re) {
		return s.errorForClient(c, re)
	}
	var oe *oauth.Error
	if errors.As(err, &oe) {
		return errorf(oe.Status, oe.Code, "This sign-in request from an app cannot go on: %s", oe.Description)
	}
	if err != nil {
		return err
	}
	if c.Method() == fiber.MethodPost {
		return s.answerAuthorize(c, req)
	}
	ws, err := s.opts.DB.Workspaces(c.UserContext(), userID(c))
	if err != nil {
		return err
	}
	v := view{Title: "Allow " + shown(req.Client.Name), Nav: "workspaces", User: s.pageUser(c),
		Data: fiber.Map{"Req": req, "Workspaces": ws, "Params": req.Params, "Target": redirectShown(req.RedirectURI)}}
	if err := s.render(c, http.StatusOK, "oauth_consent", v); err != nil {
		return err
	}
	s.allowFormTarget(c, req.RedirectURI)
	return nil
}

// errorForClient shows an authorization request's error to the person with
// a link that takes it back to the client, instead of redirecting at once:
// registration is open, so a redirect URI is anyone's, and a link to this
// server that bounced the browser straight on to it would make the server an
// open redirector for whoever registered (RFC 9700 §4.11.2). The person
// leaves with a click, seeing where to.
func (s *Server) errorForClient(c *fiber.Ctx, re *oauth.RedirectError) error {
	return s.render(c, re.Err.Status, "error", view{Title: "This app's sign-in request cannot go on", User: s.pageUser(c),
		Error: "The app's request is not one this server can answer: " + re.Err.Description + " Tell the app, or close this page.",
		Data:  fiber.Map{"Return": fiber.Map{"URL": re.URL, "Host": redirectShown(re.URL)}}})
}

// answerAuthorize applies the person's answer on the consent form.
func (s *Server) answerAuthorize(c *fiber.Ctx, req *oauth.AuthRequest) error {
	if c.FormValue("decision") != "allow" {
		return s.redirectToClient(c, s.oauth.DenyURL(req))
	}
	w, err := s.consentWorkspace(c)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest(codeInvalidField, "Choose one of your workspaces for %s to act for.", req.Client.Name)
	}
	if err != nil {
		return err
	}
	to, err := s.oauth.Approve(c.UserContext(), req, userID(c), w.ID)
	if err != nil {
		return err
	}
	s.opts.Logger.Info("oauth client allowed", "client", req.Client.Name, "host", req.ClientHost, "workspace", w.ID)
	return s.redirectToClient(c, to)
}

// consentWorkspace is the workspace the person picked on the consent form,
// or the one they named there when they had none.
func (s *Server) consentWorkspace(c *fiber.Ctx) (*store.Workspace, error) {
	if id := c.FormValue("workspace"); id != "" || c.FormValue("newWorkspace") == "" {
		return s.opts.DB.Workspace(c.UserContext(), userID(c), id)
	}
	name, err := cleanName("name", c.FormValue("newWorkspace"))
	if err != nil {
		return nil, err
	}
	return s.createWorkspace(c.UserContext(), userID(c), name)
}

// postAuthorize reads the consent form, which carries the authorization
// request's parameters back, and checks the request again from scratch.
func (s *Server) postAuthorize(c *fiber.Ctx) error {
	q := url.Values{}
	for _, k := range []string{"client_id", "redirect_uri", "response_type", "state", "code_challenge", "code_challenge_method", "scope", "resource"} {
		if v := c.FormValue(k); v != "" {
			q.Set(k, v)
		}
	}
	return s.authorizeFrom(c, q)
}

// redirectToClient sends the browser to the client's redirect URI. The
// consent form's CSP allowed that target (form-action applies to the
// redirect after a form post).
func (s *Server) redirectToClient(c *fiber.Ctx, to string) error {
	s.pageHeaders(c)
	s.allowFormTarget(c, to)
	return c.Redirect(to, http.StatusSeeOther)
}

// allowFormTarget widens the page's CSP form-action to the client's
// redirect URI (scheme, host and port), so the consent form may post here
// and be redirected there.
func (s *Server) allowFormTarget(c *fiber.Ctx, redirect string) {
	src := "'self'"
	if u, err := url.Parse(redirect); err == nil && u.Scheme != "" {
		if u.Host != "" {
			src += " " + u.Scheme + "://" + u.Host
		} else {
			src += " " + u.Scheme + ":"
		}
	}
	csp := string(c.Response().Header.Peek(fiber.HeaderContentSecurityPolicy))
	c.Set(fiber.HeaderContentSecurityPolicy, strings.Replace(csp, "form-action 'self'", "form-action "+src, 1))
}

// redirectShown is the redirect URI as the consent page prints it: scheme,
// host and port, which is what decides who receives the code.
func redirectShown(r string) string {
	u, err := url.Parse(r)
	if err != nil {
		return r
	}
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Scheme + "://" + u.Host
}

// authenticateAgent resolves a bearer token of either kind: an OAuth access
// token (its grant is the agent) or a pasted workspace token.
func (s *Server) authenticateAgent(ctx context.Context, tok string) (*store.AgentIdentity, error) {
	if !oauth.IsAccessToken(tok) {
		return s.opts.DB.AuthenticateAgent(ctx, tok)
	}
	a, err := s.oauth.Authenticate(ctx, tok)
	if errors.Is(err, oauth.ErrInvalidToken) {
		return nil, errorf(http.StatusUnauthorized, codeAccessTokenInvalid,
			"This access token is expired or revoked; refresh it, or authorize again (your MCP client does this when it reconnects).")
	}
	if err != nil {
		return nil, err
	}
	return &a.Agent, nil
}

// mcpChallenge adds the WWW-Authenticate challenge to every 401 from /mcp,
// so a standard MCP client finds the authorization server and starts the
// OAuth flow with no token configured (RFC 9728 §5.1).
func (s *Server) mcpChallenge(c *fiber.Ctx) error {
	err := c.Next()
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		code := ""
		if c.Get(fiber.HeaderAuthorization) != "" {
			code = "invalid_token"
		}
		c.Set(fiber.HeaderWWWAuthenticate, s.oauth.Challenge(code, ""))
	}
	return err
}

// grantRevoked ends what a revoked grant started (its running calls, its
// requests left waiting, its MCP sessions) on every instance, once the
// revocation is in the database.
func (s *Server) grantRevoked(grantID string) {
	s.grantRevokedLocal(grantID)
	s.signal(topicGrant, []byte(grantID))
	s.withdrawAgent(grantID)
}

// grantRevokedLocal forgets the grant's recent rotations and ends its calls
// and MCP sessions on this instance.
func (s *Server) grantRevokedLocal(grantID string) {
	s.oauth.GrantRevoked(grantID)
	s.agents.endLocal(grantID)
}

func (s *Server) getClients(c *fiber.Ctx) error {
	gs, err := s.opts.DB.OAuthGrants(c.UserContext(), userID(c), c.Params("id"))
	if err != nil {
		return storeError(err, "workspace")
	}
	return c.JSON(fiber.Map{"clients": gs})
}

func (s *Server) deleteClient(c *fiber.Ctx) error {
	if err := s.revokeClient(c); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *Server) postPageRevokeClient(c *fiber.Ctx) error {
	if err := s.revokeClient(c); err != nil {
		return err
	}
	return c.Redirect("/workspaces/"+c.Params("id")+"?revoked=client", http.StatusSeeOther)
}

// revokeClient revokes a connected client's grant: its tokens stop working,
// and its calls and MCP sessions end at once (the sessions close in the
// background, after their calls have answered).
func (s *Server) revokeClient(c *fiber.Ctx) error {
	uid, ws, id := userID(c), c.Params("id"), c.Params("grantId")
	if err := s.opts.DB.RevokeOAuthGrant(c.UserContext(), uid, ws, id); err != nil {
		return storeError(err, "connected client")
	}
	s.grantRevoked(id)
	s.publish(uid, evTokenRevoked, fiber.Map{"token": fiber.Map{"id": id, "workspaceId": ws}})
	return nil
}

// mcpOAuthCommands are the no-token ways to connect, for the workspace page.
func (s *Server) mcpOAuthCommands() fiber.Map {
	u := s.opts.PublicURL + oauth.PathMCP
	return fiber.Map{
		"Claude": "claude mcp add --transport http tabbridge " + shellWord(u),
		"Codex":  "codex mcp add tabbridge --url " + shellWord(u) + " && codex mcp login tabbridge",
	}
}
