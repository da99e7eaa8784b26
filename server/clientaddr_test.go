package server_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestSignInLimitsCountTheClientBehindAProxy: behind a trusted reverse proxy
// each client has its own budget of sign-in attempts, read from the right of
// X-Forwarded-For (what the proxy appended), so a guesser can neither use up
// everyone's budget nor escape its own by sending a header of its own; from
// an address that is not a trusted proxy, the header counts for nothing.
func TestSignInLimitsCountTheClientBehindAProxy(t *testing.T) {
	attempt := func(t *testing.T, env *servertest.Env, xff ...string) int {
		t.Helper()
		c := env.NewClient(t) // its CSRF token; the limit counts addresses, not clients
		req, _ := http.NewRequest("POST", env.URL+"/api/auth/signin", strings.NewReader(`{"email":"nobody@example.com","password":"wrong password"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", c.CSRF)
		for _, h := range xff {
			req.Header.Add("X-Forwarded-For", h)
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const budget = 3
	limited := func(t *testing.T, env *servertest.Env, xff ...string) int {
		t.Helper()
		for i := range budget + 1 {
			if code := attempt(t, env, xff...); code == http.StatusTooManyRequests {
				return i
			}
		}
		return budget + 1
	}

	t.Run("behind a trusted proxy", func(t *testing.T) {
		env := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
			o.AuthAttemptsPerMinute = budget
			o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}
		})
		if n := limited(t, env, "203.0.113.7"); n != budget {
			t.Fatalf("the guesser was stopped after %d attempts, want %d", n, budget)
		}
		// Another client behind the same proxy keeps its whole budget.
		if code := attempt(t, env, "198.51.100.9"); code == http.StatusTooManyRequests {
			t.Fatal("another client behind the proxy was refused for the guesser's attempts")
		}
		// The guesser writes its own X-Forwarded-For; the proxy appends the real address.
		for _, forged := range []string{"192.0.2.1", "192.0.2.2, 192.0.2.3"} {
			if code := attempt(t, env, forged+", 203.0.113.7"); code != http.StatusTooManyRequests {
				t.Fatalf("a forged %q let the guesser try again (%d)", forged, code)
			}
		}
		// Two proxies: the inner one's own address is skipped; so is a second header line.
		if code := attempt(t, env, "203.0.113.7, 10.1.2.3"); code != http.StatusTooManyRequests {
			t.Fatalf("through two proxies the guesser tried again (%d)", code)
		}
		if code := attempt(t, env, "192.0.2.50", "203.0.113.7"); code != http.StatusTooManyRequests {
			t.Fatalf("with the address on a second header line the guesser tried again (%d)", code)
		}
	})

	t.Run("no trusted proxy", func(t *testing.T) {
		env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.AuthAttemptsPerMinute = budget })
		if n := limited(t, env, "203.0.113.7"); n != budget {
			t.Fatalf("stopped after %d attempts, want %d", n, budget)
		}
		if code := attempt(t, env, "198.51.100.9"); code != http.StatusTooManyRequests {
			t.Fatalf("a header from a client that is no proxy bought a new budget (%d)", code)
		}
	})
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := server.ParseTrustedProxies(" 127.0.0.1, 10.0.0.0/8 ,::1,")
	if err != nil || len(got) != 3 || got[0].String() != "127.0.0.1/32" || got[1].String() != "10.0.0.0/8" || got[2].String() != "::1/128" {
		t.Fatalf("parsed %v, %v", got, err)
	}
	if _, err := server.ParseTrustedProxies("127.0.0.1,proxy.example"); err == nil || !strings.Contains(err.Error(), `"proxy.example"`) {
		t.Fatalf("a host name: %v", err)
	}
}
