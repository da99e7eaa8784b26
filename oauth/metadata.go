package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// FetcherOptions configures a MetadataFetcher.
type FetcherOptions struct {
	// Timeout bounds one fetch, redirects included (default 5 s).
	Timeout time.Duration
	// MaxBytes bounds a document (default 64 KiB).
	MaxBytes int64
	// CacheTTL is how long a fetched document is trusted (default 5 minutes);
	// a failed fetch is not cached.
	CacheTTL time.Duration
	// AllowAddrs lists exact "ip:port" addresses that may be dialled although
	// they are private or loopback. Tests set it to their own server's
	// address; every other address is still checked.
	AllowAddrs []string
	// RootCAs, when set, replaces the system roots (tests: httptest's CA).
	RootCAs *x509.CertPool
}

// MetadataFetcher fetches client ID metadata documents: the client_id is an
// https URL whose document describes the client. The server fetches a URL
// that anyone chose, so every dialled address is checked after DNS and after
// every redirect (in the dialer's Control hook, which sees the address
// actually connected to), and no proxy is used (a proxy's address would be
// the only one checked).
type MetadataFetcher struct {
	opts   FetcherOptions
	client *http.Client

	mu    sync.Mutex
	cache map[string]cachedClient // guarded by mu
}

type cachedClient struct {
	c  *Client
	at time.Time
}

// NewMetadataFetcher returns a fetcher with defaults filled in.
func NewMetadataFetcher(opts FetcherOptions) *MetadataFetcher {
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 64 << 10
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 5 * time.Minute
	}
	allowed := map[string]bool{}
	for _, a := range opts.AllowAddrs {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			allowed[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()] = true
		}
	}
	dialer := &net.Dialer{Timeout: opts.Timeout, Control: func(network, address string, _ syscall.RawConn) error {
		return checkDial(address, allowed)
	}}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    opts.Timeout,
		ResponseHeaderTimeout:  opts.Timeout,
		MaxResponseHeaderBytes: 16 << 10,
		DisableKeepAlives:      true,
	}
	client := &http.Client{Transport: tr, Timeout: opts.Timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("more than 3 redirects")
		}
		if req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to %s, which is not https", req.URL.Redacted())
		}
		return nil
	}}
	return &MetadataFetcher{opts: opts, client: client, cache: map[string]cachedClient{}}
}

// errForbiddenAddr is what the dial check refuses.
var errForbiddenAddr = errors.New("address is not public")

// checkDial refuses any address that is not public unicast, unless it is
// one of the exact allowed ip:port pairs.
func checkDial(address string, allowed map[string]bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, errForbiddenAddr)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if allowed[ap.String()] {
		return nil
	}
	if !publicAddr(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", ap, errForbiddenAddr)
	}
	return nil
}

// nonPublic are ranges that are not reachable on the public internet or
// that reach something else than they say (NAT64, 6to4, Teredo, benchmarking,
// carrier-grade NAT), beyond what netip's predicates cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
}

func publicAddr(a netip.Addr) bool {
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// checkMetadataURL is the client ID URL rule of the metadata document draft:
// https, a path, no fragment, no credentials.
func checkMetadataURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("it is not an https URL")
	}
	if u.Path == "" || u.Path == "/" {
		return nil, errors.New("it has no path")
	}
	if u.Fragment != "" || u.User != nil {
		return nil, errors.New("it has a fragment or credentials")
	}
	if err := plainURI(raw, u); err != nil { // its host is what the consent page shows as checked
		return nil, fmt.Errorf("it %w", err)
	}
	return u, nil
}

// Client returns the client a metadata document URL describes, from the
// cache or fetched. Failures are *Error (invalid_client) with a reason.
func (f *MetadataFetcher) Client(ctx context.Context, id string) (*Client, error) {
	f.mu.Lock()
	e, ok := f.cache[id]
	f.mu.Unlock()
	if ok && time.Since(e.at) < f.opts.CacheTTL {
		return e.c, nil
	}
	c, err := f.fetch(ctx, id)
	if err != nil {
		return nil, oauthErr(http.StatusUnauthorized, "invalid_client", "The client metadata document at %q cannot be used: %v. "+
			"(A server that cannot reach the internet can turn metadata documents off, --oauth-metadata-documents=false, so that clients register instead.)", short(id), err)
	}
	f.mu.Lock()
	if len(f.cache) > 1000 {
		f.cache = map[string]cachedClient{} // bounded: start over rather than grow
	}
	f.cache[id] = cachedClient{c, time.Now()}
	f.mu.Unlock()
	return c, nil
}

func (f *MetadataFetcher) fetch(ctx context.Context, id string) (*Client, error) {
	if _, err := checkMetadataURL(id); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, errForbiddenAddr) {
			return nil, fmt.Errorf("its host resolves to an address that is not public")
		}
		return nil, fmt.Errorf("fetching it failed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching it answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading it failed: %w", err)
	}
	if int64(len(body)) > f.opts.MaxBytes {
		return nil, fmt.Errorf("it is larger than %d KiB", f.opts.MaxBytes>>10)
	}
	var doc struct {
		oauthex.ClientRegistrationMetadata
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("it is not a JSON object of client metadata: %w", err)
	}
	if doc.ClientID != id {
		return nil, fmt.Errorf("its client_id %q is not its own URL", short(doc.ClientID))
	}
	if doc.ClientSecret != "" || (doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none") {
		return nil, errors.New("it describes a confidential client; only public clients (token_endpoint_auth_method \"none\") are supported")
	}
	c, err := checkMetadata(&doc.ClientRegistrationMetadata)
	if err != nil {
		var oe *Error
		if errors.As(err, &oe) {
			return nil, errors.New(strings.TrimSuffix(oe.Description, "."))
		}
		return nil, err
	}
	c.ID = id
	c.Metadata = true
	return c, nil
}
