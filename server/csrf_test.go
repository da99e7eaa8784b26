package server_test

import (
	"net/url"
	"regexp"
	"testing"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

var (
	metaCSRF = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)
	formCSRF = regexp.MustCompile(`<input type="hidden" name="_csrf" value="([^"]*)">`)
)

// workspaceCount is how many workspaces c's person has.
func workspaceCount(t *testing.T, c *servertest.Client) int {
	t.Helper()
	var out struct{ Workspaces []any }
	c.MustJSON("GET", "/api/workspaces", nil, 200, &out)
	return len(out.Workspaces)
}

// TestAPlantedCSRFCookieOpensNothing: a page on another port of the same
// host can set the tb_csrf cookie (cookies ignore ports) and send the same
// value; it changes nothing, through the API or a form, even when the
// request is signed in by the refresh cookie alone. The token that works is
// the sign-in's own, as GET /api/auth/csrf and every page's meta tag give it,
// and another sign-in's token (the same person's) does not.
func TestAPlantedCSRFCookieOpensNothing(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	alice := env.Person(t, "alice@example.com")
	var own struct{ CSRFToken string }
	alice.MustJSON("GET", "/api/auth/csrf", nil, 200, &own)
	page := newBrowser(t, env, alice).get("/workspaces")
	m := metaCSRF.FindStringSubmatch(page.body)
	if m == nil || m[1] != own.CSRFToken {
		t.Fatalf("the page's meta tag %v, want the sign-in's token %q", m, own.CSRFToken)
	}
	for _, f := range formCSRF.FindAllStringSubmatch(page.body, -1) {
		if f[1] != own.CSRFToken {
			t.Fatalf("a form of the page carries %q, want the sign-in's token", f[1])
		}
	}
	other := env.NewClient(t)
	other.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "alice@example.com", "password": "password-alice@example.com"}, 200, nil)
	if other.CSRF == own.CSRFToken {
		t.Fatal("two sign-ins share a CSRF token")
	}

	const planted = "planted-planted-planted-planted-planted-planted"
	alice.SetCookie("tb_csrf", planted)
	b := newBrowser(t, env, alice)
	for _, try := range []struct {
		what, token string
	}{{"a planted cookie's value", planted}, {"another sign-in's token", other.CSRF}} {
		alice.CSRF = try.token
		if status, body := alice.Do("POST", "/api/workspaces", map[string]string{"name": "Forged"}); status != 403 || servertest.ErrorCode(body) != "csrf_token" {
			t.Fatalf("API post with %s: %d %s", try.what, status, body)
		}
		b.post("/workspaces", url.Values{"name": {"Forged"}, "_csrf": {try.token}}).want(t, 403)
	}
	// Without an access cookie the request is signed in by the refresh
	// cookie; the planted cookie still matches nothing.
	access := alice.Cookie("tb_access")
	alice.SetCookie("tb_access", "")
	b.post("/workspaces", url.Values{"name": {"Forged"}, "_csrf": {planted}}).want(t, 403)
	if n := workspaceCount(t, other); n != 0 {
		t.Fatalf("forged posts created %d workspaces", n)
	}

	alice.SetCookie("tb_access", access)
	alice.CSRF = own.CSRFToken
	alice.MustJSON("POST", "/api/workspaces", map[string]string{"name": "Mine"}, 201, nil)
	b.post("/workspaces", url.Values{"name": {"Also mine"}, "_csrf": {own.CSRFToken}}).want(t, 303)
	if n := workspaceCount(t, other); n != 2 {
		t.Fatalf("the sign-in's own token created %d workspaces, want 2", n)
	}
}
