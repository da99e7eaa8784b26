package server_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type signInRow struct {
	ID         string `json:"id"`
	Browser    string `json:"browser"`
	UserAgent  string `json:"userAgent"`
	Current    bool   `json:"current"`
	CreatedAt  string `json:"createdAt"`
	LastUsedAt string `json:"lastUsedAt"`
}

func signInsOf(t *testing.T, c *servertest.Client) []signInRow {
	t.Helper()
	var out struct {
		SignIns []signInRow `json:"signIns"`
	}
	c.MustJSON("GET", "/api/auth/signins", nil, 200, &out)
	return out.SignIns
}

func signInAgain(t *testing.T, env *servertest.Env, email, password string) *servertest.Client {
	t.Helper()
	c := env.NewClient(t)
	c.MustJSON("POST", "/api/auth/signin", map[string]string{"email": email, "password": password}, 200, nil)
	return c
}

// TestSignOutAnotherSignIn: the person lists their sign-ins (the current one
// marked) and signs one out; that sign-in's event stream and extension socket
// close as on sign-out, its session is refused, and the others are untouched.
// Another person's sign-in, or one already ended, is not found.
func TestSignOutAnotherSignIn(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	laptop := env.Person(t, "ada@example.com")
	desktop := signInAgain(t, env, "ada@example.com", "password-ada@example.com")
	bob := env.Person(t, "bob@example.com")

	list := signInsOf(t, laptop)
	if len(list) != 2 {
		t.Fatalf("sign-ins = %+v, want two", list)
	}
	var mine, theirs string
	for _, si := range list {
		if si.Browser != "A Go program" || si.UserAgent == "" || si.CreatedAt == "" || si.LastUsedAt == "" {
			t.Fatalf("sign-in row %+v", si)
		}
		if si.Current {
			mine = si.ID
		} else {
			theirs = si.ID
		}
	}
	if mine == "" || theirs == "" {
		t.Fatalf("no current sign-in marked: %+v", list)
	}
	events := openStream(t, env, desktop, nil)
	events.next(t, true)
	ext, _ := extBrowser(t, env, desktop, "desktop-01")

	var out struct{ SignedOut, Current bool }
	laptop.MustJSON("DELETE", "/api/auth/signins/"+theirs, nil, 200, &out)
	if !out.SignedOut || out.Current {
		t.Fatalf("answer %+v", out)
	}
	events.ended(t)
	if code, reason, err := ext.Closed(testutil.WaitShort); err != nil || code != bridge.CloseSignedOut {
		t.Fatalf("the signed-out sign-in's socket: %d %q %v, want %d", code, reason, err, bridge.CloseSignedOut)
	}
	if status, body := desktop.Do("GET", "/api/auth/me", nil); status != 401 {
		t.Fatalf("the ended sign-in still works: %d %s", status, body)
	}
	if status, body := laptop.Do("DELETE", "/api/auth/signins/"+theirs, nil); status != 404 || servertest.ErrorCode(body) != "not_found" {
		t.Fatalf("ending it again: %d %s", status, body)
	}
	if status, _ := bob.Do("DELETE", "/api/auth/signins/"+mine, nil); status != 404 {
		t.Fatalf("another person ending Ada's sign-in: %d, want 404", status)
	}
	if l := signInsOf(t, laptop); len(l) != 1 || l[0].ID != mine {
		t.Fatalf("after: %+v", l)
	}
	// Signing out the current one from the list signs this browser out.
	laptop.MustJSON("DELETE", "/api/auth/signins/"+mine, nil, 200, &out)
	if !out.Current {
		t.Fatal("ending the current sign-in did not say so")
	}
	if status, _ := laptop.Do("GET", "/api/auth/me", nil); status != 401 {
		t.Fatalf("after ending its own sign-in: %d, want 401", status)
	}
}

// TestChangePassword: a wrong current password or a short new one changes
// nothing; the right one sets the new password, signs out every other
// sign-in (closing its sockets) and keeps this one.
func TestChangePassword(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	const old = "password-ada@example.com"
	laptop := env.Person(t, "ada@example.com")
	desktop := signInAgain(t, env, "ada@example.com", old)
	ext, _ := extBrowser(t, env, desktop, "desktop-01")

	// Without the CSRF token (another site's form or script) the API refuses.
	token := laptop.CSRF
	laptop.CSRF = "forged-forged-forged-forged-forged-forged"
	for _, r := range []struct{ method, path string }{{"POST", "/api/auth/password"}, {"DELETE", "/api/auth/signins/x"}} {
		if status, body := laptop.Do(r.method, r.path, map[string]string{"currentPassword": old, "newPassword": "a new password"}); status != 403 {
			t.Fatalf("%s %s with a forged CSRF token: %d %s, want 403", r.method, r.path, status, body)
		}
	}
	laptop.CSRF = token
	for _, bad := range []map[string]string{
		{"currentPassword": "wrong-wrong", "newPassword": "a new password"},
		{"currentPassword": old, "newPassword": "short"},
		{"newPassword": "a new password"},
	} {
		if status, body := laptop.Do("POST", "/api/auth/password", bad); status != 400 {
			t.Fatalf("%v: %d %s, want 400", bad, status, body)
		}
	}
	if status, _ := desktop.Do("GET", "/api/auth/me", nil); status != 200 {
		t.Fatal("a refused change signed the other browser out")
	}
	signInAgain(t, env, "ada@example.com", old) // the old password still works

	var out struct {
		Changed         bool
		SignedOutOthers int
	}
	laptop.MustJSON("POST", "/api/auth/password", map[string]string{"currentPassword": old, "newPassword": "a new password"}, 200, &out)
	if !out.Changed || out.SignedOutOthers != 2 {
		t.Fatalf("answer %+v, want two other sign-ins ended", out)
	}
	if code, reason, err := ext.Closed(testutil.WaitShort); err != nil || code != bridge.CloseSignedOut {
		t.Fatalf("the other sign-in's socket: %d %q %v, want %d", code, reason, err, bridge.CloseSignedOut)
	}
	if status, _ := desktop.Do("GET", "/api/auth/me", nil); status != 401 {
		t.Fatalf("the other sign-in after the change: %d, want 401", status)
	}
	laptop.MustJSON("GET", "/api/auth/me", nil, 200, nil)
	c := env.NewClient(t)
	if status, _ := c.Do("POST", "/api/auth/signin", map[string]string{"email": "ada@example.com", "password": old}); status != 401 {
		t.Fatalf("the old password after the change: %d, want 401", status)
	}
	signInAgain(t, env, "ada@example.com", "a new password")
}

// TestSettingsPageSignInsAndPassword drives the same through the Settings
// page's forms: the list names the browser, a wrong password shows its error
// beside the form, the right one says how many sign-ins it ended, and signing
// out a sign-in (or this one) goes back to Settings (or to Sign in).
func TestSettingsPageSignInsAndPassword(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	ada := env.Person(t, "ada@example.com")
	other := signInAgain(t, env, "ada@example.com", "password-ada@example.com")
	b := newBrowser(t, env, ada)
	p := b.get("/settings")
	p.want(t, 200, "Where you are signed in", "A Go program", "This browser", `action="/settings/password"`)
	if n := strings.Count(p.body, `action="/settings/signins/`); n != 2 {
		t.Fatalf("%d sign-out forms, want 2", n)
	}
	b.post("/settings/password", url.Values{"current_password": {"nope-nope"}, "new_password": {"a new password"}}).
		want(t, 400, `id="password-error"`, "Your current password is not right")
	b.post("/settings/password", url.Values{"current_password": {"password-ada@example.com"}, "new_password": {"a new password"}}).
		want(t, 200, `id="password-done"`, "1 other sign-in was signed out.")
	if status, _ := other.Do("GET", "/api/auth/me", nil); status != 401 {
		t.Fatal("the page's password change left the other sign-in on")
	}
	third := signInAgain(t, env, "ada@example.com", "a new password")
	var id string
	for _, si := range signInsOf(t, ada) {
		if !si.Current {
			id = si.ID
		}
	}
	b.post("/settings/signins/"+id+"/signout", nil).redirect(t, "/settings")
	if status, _ := third.Do("GET", "/api/auth/me", nil); status != 401 {
		t.Fatal("signed out from the page, the sign-in still works")
	}
	b.post("/settings/signins/"+id+"/signout", nil).want(t, 404)
	mine := signInsOf(t, ada)[0].ID
	b.post("/settings/signins/"+mine+"/signout", nil).redirect(t, "/signin")
}

func TestBrowserLabels(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36":                   "Chrome on macOS",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0":           "Edge on Windows",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0":                                                                  "Firefox on Linux",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1": "Safari on iOS",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36":                           "Headless Chrome on Linux",
		"curl/8.5.0": "curl",
		"":           "Unknown browser",
		"Lynx/2.9":   "Unknown browser",
	} {
		if got := server.BrowserLabel(ua); got != want {
			t.Errorf("%q: %q, want %q", ua, got, want)
		}
	}
}
