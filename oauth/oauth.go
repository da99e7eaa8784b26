// Package oauth makes Tabbridge the OAuth 2.1 authorization server of its own
// MCP endpoint, as the MCP authorization specification (2025-11-25) asks:
// discovery documents (RFC 9728, RFC 8414), public clients registered
// dynamically (RFC 7591) or identified by a client ID metadata document,
// the authorization-code grant with PKCE S256 and the RFC 9207 "iss"
// response parameter, and rotating refresh tokens whose reuse revokes the
// grant. It knows nothing of HTTP frameworks: server wires its endpoints and
// renders the consent page; this package decides what is valid.
//
// A grant is one client's authorization to act for one workspace; its id is
// the identity MCP sessions and per-agent limits use, so rotating tokens do
// not break a session.
package oauth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/sync/singleflight"

	"github.com/tabbridge/tabbridge/store"
)

// Token prefixes say what a secret is to a person who finds one in a log.
const (
	AccessPrefix  = "tbo_"
	RefreshPrefix = "tbr_"
	codePrefix    = "tbc_"
)

// Scope is the one scope Tabbridge grants: use this workspace's MCP tools.
const Scope = "mcp"

// scopeOffline is accepted (clients add it to ask for refresh tokens, which
// are always issued) and granted back when asked for.
const scopeOffline = "offline_access"

// Options configures a Server.
type Options struct {
	// Issuer is the server's public origin, exactly as it appears in the
	// metadata's "issuer" and every response's "iss" (no trailing slash).
	Issuer string
	DB     *store.DB
	// Now is the clock for codes and tokens; time.Now when nil.
	Now func() time.Time
	// AccessTTL, RefreshTTL and CodeTTL are lifetimes (defaults 15 minutes,
	// 30 days, 2 minutes).
	AccessTTL, RefreshTTL, CodeTTL time.Duration
	// Metadata fetches client ID metadata documents; nil uses a fetcher with
	// the default SSRF protection and no exceptions.
	Metadata *MetadataFetcher
	// NoMetadataDocuments stops advertising client ID metadata documents and
	// refuses URL client ids, for a server that cannot reach the internet:
	// clients then register dynamically.
	NoMetadataDocuments bool
}

// Server is the authorization server. It is safe for concurrent use.
type Server struct {
	opts Options // static after New

	// rotations collapses concurrent refreshes with one refresh token, and
	// recent keeps each rotation's answer for rotationGrace (see refresh).
	rotations singleflight.Group
	recent    sync.Map // refresh-token hash → rotation
}

// New returns a Server with defaults filled in.
func New(opts Options) (*Server, error) {
	if opts.DB == nil {
		return nil, errors.New("new oauth server: no database")
	}
	opts.Issuer = strings.TrimRight(opts.Issuer, "/")
	if !strings.HasPrefix(opts.Issuer, "http://") && !strings.HasPrefix(opts.Issuer, "https://") {
		return nil, fmt.Errorf("new oauth server: issuer %q must be an http or https origin", opts.Issuer)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AccessTTL == 0 {
		opts.AccessTTL = 15 * time.Minute
	}
	if opts.RefreshTTL == 0 {
		opts.RefreshTTL = 30 * 24 * time.Hour
	}
	if opts.CodeTTL == 0 {
		opts.CodeTTL = 2 * time.Minute
	}
	if opts.Metadata == nil {
		opts.Metadata = NewMetadataFetcher(FetcherOptions{})
	}
	return &Server{opts: opts}, nil
}

// Paths of the endpoints, relative to the issuer.
const (
	PathAuthorize        = "/oauth/authorize"
	PathToken            = "/oauth/token"
	PathRegister         = "/oauth/register"
	PathRevoke           = "/oauth/revoke"
	PathResourceMetadata = "/.well-known/oauth-protected-resource"
	PathServerMetadata   = "/.well-known/oauth-authorization-server"
	PathOpenIDMetadata   = "/.well-known/openid-configuration"
	PathMCP              = "/mcp"
)

// Issuer is the exact issuer identifier.
func (s *Server) Issuer() string { return s.opts.Issuer }

// Resource is the canonical URI of the protected resource: tokens are issued
// for it alone.
func (s *Server) Resource() string { return s.opts.Issuer + PathMCP }

// ResourceMetadataURL is where the MCP endpoint's protected-resource metadata
// lives (RFC 9728 §3.1: the well-known path followed by the resource's path).
func (s *Server) ResourceMetadataURL() string { return s.opts.Issuer + PathResourceMetadata + PathMCP }

// ResourceMetadata is the RFC 9728 document for resource, which is either
// the MCP endpoint (path-suffixed well-known URL) or the origin (the root
// well-known URL, whose resource identifier has no path).
func (s *Server) ResourceMetadata(resource string) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{s.opts.Issuer},
		ScopesSupported:        []string{Scope},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Tabbridge",
	}
}

// ServerMetadata is the RFC 8414 document, also served at the OpenID
// discovery path that some clients try first.
func (s *Server) ServerMetadata() *oauthex.AuthServerMeta {
	iss := s.opts.Issuer
	return &oauthex.AuthServerMeta{
		Issuer:                                     iss,
		AuthorizationEndpoint:                      iss + PathAuthorize,
		TokenEndpoint:                              iss + PathToken,
		RegistrationEndpoint:                       iss + PathRegister,
		RevocationEndpoint:                         iss + PathRevoke,
		ScopesSupported:                            []string{Scope, scopeOffline},
		ResponseTypesSupported:                     []string{"code"},
		ResponseModesSupported:                     []string{"query"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported:          []string{"none"},
		RevocationEndpointAuthMethodsSupported:     []string{"none"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		ClientIDMetadataDocumentSupported:          !s.opts.NoMetadataDocuments,
		AuthorizationResponseIssParameterSupported: true,
	}
}

// Challenge is the WWW-Authenticate value of a 401 from the MCP endpoint:
// it names the metadata that starts the flow. errCode, when set, is the
// RFC 6750 error (invalid_token for an expired or revoked token).
func (s *Server) Challenge(errCode, description string) string {
	v := fmt.Sprintf("Bearer resource_metadata=%q, scope=%q", s.ResourceMetadataURL(), Scope)
	if errCode != "" {
		v += fmt.Sprintf(", error=%q", errCode)
	}
	if description != "" {
		v += fmt.Sprintf(", error_description=%q", strings.ReplaceAll(description, `"`, "'"))
	}
	return v
}

// Error is an OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2). The
// description is written for the person or agent who reads it.
type Error struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	// Revoked is the grant a spent code or refresh token presented again
	// revoked ("" when none): a sign of a stolen token. The server logs it
	// and ends the grant's sessions.
	Revoked string `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

func oauthErr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Description: fmt.Sprintf(format, args...)}
}

func badRequest(code, format string, args ...any) *Error {
	return oauthErr(http.StatusBadRequest, code, format, args...)
}

// now is the clock, in the store's precision.
func (s *Server) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }
