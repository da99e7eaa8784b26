package sitetools

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrOrigin is wrapped by every origin NormalizeOrigin refuses; the message
// says what is wrong and what to send instead.
var ErrOrigin = errors.New("sitetools: invalid origin")

// maxOriginLen bounds an origin before it is parsed.
const maxOriginLen = 300

// NormalizeOrigin turns a site's origin into the one form Tabbridge stores and
// compares: lower-case http or https scheme, lower-case ASCII (punycode) host,
// the port only when it is not the scheme's default. A trailing "/" is
// accepted; any other path, a query, a fragment or credentials are refused
// rather than stripped, so a person never shares something other than what
// they typed. The origin a browser reports (location.origin) is already in
// this form.
func NormalizeOrigin(raw string) (string, error) {
	if len(raw) > maxOriginLen {
		return "", fmt.Errorf("%w: it is %d bytes; an origin is at most %d", ErrOrigin, len(raw), maxOriginLen)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: %q is not an origin; send scheme://host[:port], e.g. https://example.com", ErrOrigin, raw)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("%w: only http and https sites can be shared, not %s:", ErrOrigin, scheme)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("%w: %q has more than an origin; send only %s://%s", ErrOrigin, raw, scheme, u.Host)
	}
	host, err := normalizeHost(u.Hostname())
	if err != nil {
		return "", err
	}
	port, err := normalizePort(scheme, u.Port(), strings.HasSuffix(u.Host, ":"))
	if err != nil {
		return "", err
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

func normalizeHost(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("%w: the origin has no host", ErrOrigin)
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String(), nil
	}
	ascii, err := idna.Lookup.ToASCII(strings.TrimSuffix(h, "."))
	if err == nil {
		// A name that does not survive a second pass is not one a browser
		// would report (e.g. invalid UTF-8 mapped to U+FFFD).
		again, err2 := idna.Lookup.ToASCII(ascii)
		if err2 != nil || again != ascii {
			err = errors.New("not stable")
		}
	}
	if err != nil || !utf8.ValidString(h) || emptyLabel(ascii) {
		return "", fmt.Errorf("%w: %q is not a valid host name", ErrOrigin, h)
	}
	return strings.ToLower(ascii), nil
}

// emptyLabel reports a host name with an empty label ("", ".a", "a..b").
func emptyLabel(host string) bool {
	for _, l := range strings.Split(host, ".") {
		if l == "" {
			return true
		}
	}
	return false
}

func normalizePort(scheme, p string, emptyPort bool) (string, error) {
	if p == "" {
		if emptyPort {
			return "", fmt.Errorf("%w: the port is empty", ErrOrigin)
		}
		return "", nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%w: port %q is not a number from 1 to 65535", ErrOrigin, p)
	}
	if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
		return "", nil
	}
	return strconv.Itoa(n), nil
}
