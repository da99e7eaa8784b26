package daemon

import (
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzDecodeCredentials: the credentials file is read back from disk, so
// any bytes. What it takes passes Check, carries a token that an
// Authorization header can hold, and reads back the same once written the
// way SaveCredentials writes it; anything else is an error.
func FuzzDecodeCredentials(f *testing.F) {
	good, _ := json.MarshalIndent(Credentials{Server: "https://tb.example", Token: "tbm_abcDEF123-_", Install: NewInstallID()}, "", "  ")
	f.Add(string(good) + "\n")
	f.Add(`{"server":"https://tb.example","token":"tbm_a\u0001b","install":"0123456789abcdef0123456789abcdef"}`)
	f.Add(`{"server":"https://tb.example","token":"tbm_é","install":"0123456789abcdef0123456789abcdef"}`)
	f.Add(`{"server":"https://tb.example","token":"tbm_a","install":"0123456789abcdef0123456789abcdef","extra":1}`)
	f.Add(`{"server":"https://tb.example","token":"tbm_a","install":"0123456789abcdef0123456789abcdef"}{}`)
	f.Add(`{"server":"ftp://x","token":"tbm_a","install":"0123456789abcdef0123456789abcdef"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, file string) {
		c, err := decodeCredentials(strings.NewReader(file))
		if err != nil {
			if err.Error() == "" || c != (Credentials{}) {
				t.Fatalf("decodeCredentials(%q) = %+v, %v", file, c, err)
			}
			return
		}
		if err := c.Check(); err != nil {
			t.Fatalf("decodeCredentials(%q) took %+v, which Check refuses: %v", file, c, err)
		}
		if !httpguts.ValidHeaderFieldValue("Bearer "+c.Token) || !httpguts.ValidHeaderFieldValue(c.Install) {
			t.Fatalf("decodeCredentials(%q) took a token or install id no header can carry: %+v", file, c)
		}
		b, _ := json.MarshalIndent(c, "", "  ")
		back, err := decodeCredentials(strings.NewReader(string(b) + "\n"))
		if err != nil || back != c {
			t.Fatalf("%+v written and read again: %+v, %v", c, back, err)
		}
	})
}
