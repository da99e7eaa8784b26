package sitetools

import (
	"net"
	"net/mail"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// Two of gojsonschema's format checkers are looser than their names: "email"
// accepts a whole RFC 5322 address line ("Bob <bob@x.com>") and "ipv4" an
// IPv6 address that embeds one ("::ffff:1.2.3.4"). A page that asks for an
// email or an IPv4 address gets exactly that.
func init() {
	gojsonschema.FormatCheckers.Add("email", emailFormat{})
	gojsonschema.FormatCheckers.Add("ipv4", ipv4Format{})
}

// emailFormat accepts a bare address (local@domain), no display name or
// angle brackets. Formats describe strings only: any other value passes.
type emailFormat struct{}

func (emailFormat) IsFormat(v any) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Name == "" && a.Address == s
}

// ipv4Format accepts dotted-quad IPv4 only.
type ipv4Format struct{}

func (ipv4Format) IsFormat(v any) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	ip := net.ParseIP(s)
	return ip != nil && ip.To4() != nil && !strings.Contains(s, ":")
}
