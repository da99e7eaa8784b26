package server

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Behind a reverse proxy every request comes from the proxy's address, so a
// limit per client address (sign-in attempts, OAuth registrations) would be
// one budget for everybody: one guesser locks everyone out. With the proxy's
// address in Options.TrustedProxies, the client's address is read from
// X-Forwarded-For instead — from the right, the first entry that is not a
// trusted proxy. The leftmost entry is whatever the client sent (Caddy and
// nginx append to it), so reading it would let a guesser pick a new address
// for every attempt.

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR
// prefixes ("127.0.0.1, 10.0.0.0/8"), for --trusted-proxies.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix (such as 10.0.0.0/8)", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// trusted reports whether a is one of the trusted proxies.
func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddress is the address of the client a request comes from: the
// connection's peer, or, when that peer is a trusted proxy, the address the
// proxies recorded in X-Forwarded-For (the rightmost one that is not itself
// a trusted proxy). Entries that are not addresses end the walk: past them
// the header cannot be trusted, and the last proxy's word is used.
func (s *Server) clientAddress(c *fiber.Ctx) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.IP()
	}
	peer = peer.Unmap()
	if !s.trusted(peer) {
		return peer.String()
	}
	var hops []string
	for _, h := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		hops = append(hops, strings.Split(string(h), ",")...)
	}
	return forwardedClient(peer, hops, s.trusted).String()
}

// forwardedClient walks the X-Forwarded-For entries hops (in order, as the
// proxies appended them) from the right, starting at peer, a trusted proxy:
// the first entry that is not a trusted proxy is the client; an entry that
// is not an address stops the walk at the last proxy's word.
func forwardedClient(peer netip.Addr, hops []string, trusted func(netip.Addr) bool) netip.Addr {
	addr := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		addr = a.Unmap()
		if !trusted(addr) {
			break
		}
	}
	return addr
}
