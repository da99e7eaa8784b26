package server_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

func TestOwnerSetupSigninAndMe(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		owner := env.Person(t, "owner@example.com")
		var me struct {
			User struct {
				Email   string `json:"email"`
				IsOwner bool   `json:"isOwner"`
			} `json:"user"`
		}
		owner.MustJSON("GET", "/api/auth/me", nil, 200, &me)
		if me.User.Email != "owner@example.com" || !me.User.IsOwner {
			t.Fatalf("me = %+v", me)
		}
		// Setup is closed once the owner exists.
		other := env.NewClient(t)
		status, body := other.Do("POST", "/api/setup", map[string]string{"email": "x@example.com", "name": "X", "password": "12345678"})
		if status != 409 || servertest.ErrorCode(body) != "owner_exists" {
			t.Fatalf("second setup: %d %s", status, body)
		}
		// Sign in with the password in a fresh client.
		c := env.NewClient(t)
		if status, body := c.Do("POST", "/api/auth/signin", map[string]string{"email": "owner@example.com", "password": "wrong-password"}); status != 401 || servertest.ErrorCode(body) != "bad_credentials" {
			t.Fatalf("wrong password: %d %s", status, body)
		}
		c.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "OWNER@example.com", "password": "password-owner@example.com"}, 200, nil)
		c.MustJSON("GET", "/api/auth/me", nil, 200, nil)
		if c.Cookie("tb_access") == "" || c.Cookie("tb_refresh") == "" {
			t.Fatal("sign-in set no session cookies")
		}
	})
}

func TestSessionCookiesAreHttpOnlyLax(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	c := env.NewClient(t)
	resp, err := c.HTTP.Post(env.URL+"/api/setup", "application/json", strings.NewReader(`{"email":"o@example.com","name":"O","password":"12345678"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// No CSRF header: refused before anything is created.
	if resp.StatusCode != 403 {
		t.Fatalf("setup without CSRF token: %d", resp.StatusCode)
	}
	req := mustRequest(t, "POST", env.URL+"/api/setup", `{"email":"o@example.com","name":"O","password":"12345678"}`)
	req.Header.Set("X-CSRF-Token", c.CSRF)
	resp, err = c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	seen := map[string]bool{}
	for _, sc := range resp.Header.Values("Set-Cookie") {
		name := strings.SplitN(sc, "=", 2)[0]
		lower := strings.ToLower(sc)
		if name == "tb_access" || name == "tb_refresh" {
			seen[name] = true
			if !strings.Contains(lower, "httponly") || !strings.Contains(lower, "samesite=lax") || strings.Contains(lower, "secure") {
				t.Errorf("%s cookie flags on an http server: %s", name, sc)
			}
		}
	}
	if !seen["tb_access"] || !seen["tb_refresh"] {
		t.Fatalf("session cookies not set: %v", resp.Header.Values("Set-Cookie"))
	}
}

func TestSecureCookiesOnHTTPS(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.PublicURL = "https://tabbridge.example" })
	c := env.NewClient(t)
	req := mustRequest(t, "POST", env.URL+"/api/setup", `{"email":"o@example.com","name":"O","password":"12345678"}`)
	req.Header.Set("X-CSRF-Token", c.CSRF)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, sc := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, "tb_access=") && !strings.Contains(strings.ToLower(sc), "secure") {
			t.Fatalf("access cookie not Secure behind https: %s", sc)
		}
	}
}

func TestRefreshRotatesAndReuseEndsTheSignin(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		clk := &clock{}
		env := servertest.Start(t, k, func(o *server.Options) { o.Now = clk.now })
		c := env.Person(t, "owner@example.com")
		old := c.Cookie("tb_refresh")

		clk.advance(16 * time.Minute) // the access token has expired
		status, body := c.Do("GET", "/api/auth/me", nil)
		if status != 401 || servertest.ErrorCode(body) != "access_expired" {
			t.Fatalf("expired access: %d %s", status, body)
		}
		c.MustJSON("POST", "/api/auth/refresh", nil, 200, nil)
		if c.Cookie("tb_refresh") == old {
			t.Fatal("refresh token not rotated")
		}
		c.MustJSON("GET", "/api/auth/me", nil, 200, nil)

		// A thief replays the old refresh token after the grace for a
		// person's own racing requests: the whole sign-in ends.
		clk.advance(11 * time.Second)
		thief := env.NewClient(t)
		thief.SetCookie("tb_refresh", old)
		status, body = thief.Do("POST", "/api/auth/refresh", nil)
		if status != 401 || servertest.ErrorCode(body) != "refresh_reused" {
			t.Fatalf("reuse: %d %s", status, body)
		}
		status, body = c.Do("GET", "/api/auth/me", nil)
		if status != 401 {
			t.Fatalf("legitimate session survived reuse: %d %s", status, body)
		}
		if status, _ := c.Do("POST", "/api/auth/refresh", nil); status != 401 {
			t.Fatalf("legitimate refresh survived reuse: %d", status)
		}
	})
}

func TestSignoutEndsAccessAtOnce(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	c := env.Person(t, "owner@example.com")
	access := c.Cookie("tb_access")
	c.MustJSON("POST", "/api/auth/signout", nil, 200, nil)
	// Even the unexpired access token, replayed, no longer works.
	c.SetCookie("tb_access", access)
	if status, _ := c.Do("GET", "/api/auth/me", nil); status != 401 {
		t.Fatalf("access token works after sign-out: %d", status)
	}
}

func TestInvitationsAreOneTime(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, nil)
		owner := env.Person(t, "owner@example.com")
		var inv struct {
			Token string `json:"token"`
			URL   string `json:"url"`
		}
		owner.MustJSON("POST", "/api/invitations", map[string]string{"note": "for Bea"}, 201, &inv)
		if !strings.HasSuffix(inv.URL, "/invite/"+inv.Token) {
			t.Fatalf("invitation url %q", inv.URL)
		}
		bea := env.NewClient(t)
		if status, body := bea.Do("POST", "/api/auth/signup", map[string]string{"email": "bea@example.com", "name": "Bea", "password": "12345678"}); status != 403 || servertest.ErrorCode(body) != "signup_closed" {
			t.Fatalf("open sign-up on a closed server: %d %s", status, body)
		}
		accept := map[string]string{"token": inv.Token, "email": "bea@example.com", "name": "Bea", "password": "bea-password"}
		bea.MustJSON("POST", "/api/invitations/accept", accept, 201, nil)
		bea.MustJSON("GET", "/api/auth/me", nil, 200, nil)
		// Bea is not the owner: she cannot invite.
		if status, body := bea.Do("POST", "/api/invitations", nil); status != 403 || servertest.ErrorCode(body) != "owner_only" {
			t.Fatalf("non-owner invites: %d %s", status, body)
		}
		accept["email"] = "carl@example.com"
		if status, body := env.NewClient(t).Do("POST", "/api/invitations/accept", accept); status != 400 || servertest.ErrorCode(body) != "invitation_invalid" {
			t.Fatalf("reused invitation: %d %s", status, body)
		}
		var list struct {
			Invitations []json.RawMessage `json:"invitations"`
		}
		owner.MustJSON("GET", "/api/invitations", nil, 200, &list)
		if len(list.Invitations) != 1 {
			t.Fatalf("invitations listed: %d", len(list.Invitations))
		}
	})
}

func TestOpenSignup(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	env.Person(t, "owner@example.com")
	b := env.Person(t, "b@example.com")
	b.MustJSON("GET", "/api/auth/me", nil, 200, nil)
	if status, body := env.NewClient(t).Do("POST", "/api/auth/signup", map[string]string{"email": "B@example.com", "name": "B2", "password": "12345678"}); status != 409 || servertest.ErrorCode(body) != "email_taken" {
		t.Fatalf("duplicate sign-up: %d %s", status, body)
	}
}

func TestConcurrentRefreshesShareOneRotation(t *testing.T) {
	clk := &clock{}
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.Now = clk.now })
	c := env.Person(t, "owner@example.com")
	clk.advance(16 * time.Minute)
	var wg sync.WaitGroup
	statuses := make(chan int, 5)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _ := c.Do("POST", "/api/auth/refresh", nil)
			statuses <- status
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 && s != 401 {
			t.Fatalf("refresh answered %d", s)
		}
	}
	// However the requests interleaved, the sign-in survives: a race between
	// a person's own requests is not theft.
	c.MustJSON("GET", "/api/auth/me", nil, 200, nil)
}
