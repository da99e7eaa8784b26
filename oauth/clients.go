package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/tabbridge/tabbridge/secret"
	"github.com/tabbridge/tabbridge/store"
)

// Client is a client as the consent page shows it and the grant records it.
type Client struct {
	ID           string
	Name         string
	RedirectURIs []string
	// Metadata is true for a client identified by a metadata document URL,
	// false for one registered dynamically.
	Metadata bool
}

// Host is what the consent page shows beside the name, since a name alone
// proves nothing: the host of a metadata document's URL (the client's own
// domain), else the host of the redirect URI the request uses.
func (c *Client) Host(redirectURI string) string {
	if c.Metadata {
		if u, err := url.Parse(c.ID); err == nil {
			return u.Host
		}
	}
	u, err := url.Parse(redirectURI)
	if err != nil {
		return ""
	}
	if u.Host == "" {
		return u.Scheme + ":" // a private-use scheme: the app that owns it
	}
	return u.Hostname()
}

// Limits on a registration, which anyone may send.
const (
	maxRedirects  = 10
	maxNameLen    = 100
	maxURILen     = 2000
	maxClientBody = 64 << 10
)

// Register handles an RFC 7591 registration request body. Every client is
// public: whatever authentication method it asks for, it gets "none" and no
// secret, and must use PKCE.
func (s *Server) Register(ctx context.Context, body []byte) (*oauthex.ClientRegistrationResponse, error) {
	if len(body) > maxClientBody {
		return nil, badRequest("invalid_client_metadata", "The registration is larger than %d KiB.", maxClientBody>>10)
	}
	var meta oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal(body, &meta); err != nil {
		return nil, badRequest("invalid_client_metadata", "The registration is not a JSON object of client metadata: %v.", err)
	}
	c, err := checkMetadata(&meta)
	if err != nil {
		return nil, err
	}
	plain, _ := secret.New("tbcl_")
	c.ID = plain
	now := s.now()
	row := &store.OAuthClient{ID: c.ID, Name: c.Name, RedirectURIs: strings.Join(c.RedirectURIs, "\n"), CreatedAt: now}
	if err := s.opts.DB.CreateOAuthClient(ctx, row); err != nil {
		return nil, fmt.Errorf("register client: %w", err)
	}
	meta.ClientName = c.Name
	meta.TokenEndpointAuthMethod = "none"
	meta.GrantTypes = []string{"authorization_code", "refresh_token"}
	meta.ResponseTypes = []string{"code"}
	return &oauthex.ClientRegistrationResponse{ClientRegistrationMetadata: meta, ClientID: c.ID, ClientIDIssuedAt: now}, nil
}

// checkMetadata validates client metadata from a registration or a metadata
// document and returns the client it describes (without its id).
func checkMetadata(meta *oauthex.ClientRegistrationMetadata) (*Client, error) {
	if len(meta.RedirectURIs) == 0 {
		return nil, badRequest("invalid_redirect_uri", "The client metadata has no redirect_uris; list where the authorization response may go.")
	}
	if len(meta.RedirectURIs) > maxRedirects {
		return nil, badRequest("invalid_redirect_uri", "The client metadata lists %d redirect_uris; at most %d are allowed.", len(meta.RedirectURIs), maxRedirects)
	}
	for _, r := range meta.RedirectURIs {
		if err := checkRedirectURI(r); err != nil {
			return nil, badRequest("invalid_redirect_uri", "Redirect URI %q: %s.", r, err)
		}
	}
	for _, g := range meta.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return nil, badRequest("invalid_client_metadata", "Grant type %q is not supported; use authorization_code and refresh_token.", g)
		}
	}
	name := strings.TrimSpace(meta.ClientName)
	if i := strings.IndexFunc(name, hiddenInName); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return nil, badRequest("invalid_client_metadata", "The client_name has the invisible character U+%04X (at byte %d); the consent page shows the name as the person reads it, so send it without control or formatting characters.", r, i)
	}
	if len([]rune(name)) > maxNameLen {
		name = string([]rune(name)[:maxNameLen])
	}
	if name == "" {
		name = "Unnamed client"
	}
	return &Client{Name: name, RedirectURIs: meta.RedirectURIs}, nil
}

// hiddenInName reports a character a client name may not hold: one that is
// invisible or reorders the text around it (a right-to-left override can make
// "Claude Code" out of other letters on the consent page), or a control
// character.
func hiddenInName(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || r == '\u115f' || r == '\u1160' || r == '\u3164' || r == '\uffa0'
}

// plainURI refuses a URI whose text is not what the consent page can show
// plainly: a URI is ASCII (RFC 3986), so a host in another script must come
// in its punycode form (xn--…), where a look-alike of a known name (Cyrillic
// "а" for Latin "a") shows as what it is; no credentials before the host
// ("https://claude.ai@evil.example" goes to evil.example); and a host that is
// a name or an address, not a pattern ("*.example.com" is never matched as
// one, and would only mislead the person).
func plainURI(raw string, u *url.URL) error {
	if i := strings.IndexFunc(raw, func(r rune) bool { return r <= 0x20 || r >= 0x7f || strings.ContainsRune("\"<>\\^`{|}", r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(raw[i:])
		return fmt.Errorf("has the character %U (at byte %d), which a URI cannot hold; percent-encode it, and write an international host name in its ASCII (punycode, xn--) form", r, i)
	}
	if u.User != nil {
		return errors.New("has credentials before its host (user@host); the answer would go to the host after the @")
	}
	if h := u.Hostname(); h != "" && !hostRE.MatchString(h) && net.ParseIP(h) == nil {
		return fmt.Errorf("has the host %q, which is not a host name or an IP address", h)
	}
	return nil
}

// hostRE is a DNS name: labels of letters, digits and hyphens.
var hostRE = regexp.MustCompile(`^(?i:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.(?i:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?))*\.?$`)

// checkRedirectURI allows what OAuth 2.1 allows a public client: https,
// http only on a loopback address (RFC 8252 §7.3), or a private-use scheme
// (RFC 8252 §7.1); never a fragment, and never a scheme a browser would run.
func checkRedirectURI(raw string) error {
	if len(raw) > maxURILen {
		return errors.New("longer than 2000 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return errors.New("not an absolute URI")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("has a fragment")
	}
	if err := plainURI(raw, u); err != nil {
		return err
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		if u.Host == "" {
			return errors.New("has no host")
		}
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return errors.New("http is allowed only on a loopback address (127.0.0.1, [::1] or localhost); use https")
		}
	case "javascript", "data", "vbscript", "file", "blob", "about":
		return fmt.Errorf("scheme %q is not allowed", u.Scheme)
	default:
		if u.Opaque == "" && u.Path == "" && u.Host == "" {
			return errors.New("has nothing after the scheme")
		}
	}
	return nil
}

func isLoopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// redirectMatches compares a request's redirect_uri with a registered one:
// exactly, except that a loopback http URI matches on any port (RFC 8252
// §7.3), since native clients listen on whatever port is free.
func redirectMatches(registered, got string) bool {
	if registered == got {
		return true
	}
	r, err1 := url.Parse(registered)
	g, err2 := url.Parse(got)
	if err1 != nil || err2 != nil || r.Scheme != "http" || g.Scheme != "http" || !isLoopbackHost(r.Hostname()) {
		return false
	}
	// Only the port may differ (RFC 8252 §7.3); a fragment is never part of a
	// redirect URI (RFC 6749 §3.1.2), so one that carries one matches nothing.
	return r.Hostname() == g.Hostname() && r.EscapedPath() == g.EscapedPath() && r.RawQuery == g.RawQuery && r.User == nil && g.User == nil &&
		g.Fragment == "" && !strings.Contains(got, "#")
}

// client resolves a client_id: an https URL is a metadata document to fetch
// (cached), anything else a dynamic registration.
func (s *Server) client(ctx context.Context, id string) (*Client, error) {
	if strings.HasPrefix(id, "https://") {
		if s.opts.NoMetadataDocuments {
			return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "This server does not fetch client metadata documents; the client must register (dynamic client registration) instead.")
		}
		return s.opts.Metadata.Client(ctx, id)
	}
	if id == "" {
		return nil, badRequest("invalid_request", "The request has no client_id.")
	}
	row, err := s.opts.DB.OAuthClientByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "Client %q is not registered here; register it again (the client does this itself when it reconnects).", short(id))
	}
	if err != nil {
		return nil, fmt.Errorf("find client: %w", err)
	}
	return &Client{ID: row.ID, Name: row.Name, RedirectURIs: row.Redirects()}, nil
}

// short keeps an untrusted value readable in an error: at most 80 bytes,
// cut between characters (a cut inside one would put bytes that are not
// UTF-8 into the error the person or the client reads).
func short(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
