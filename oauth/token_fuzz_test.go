package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// FuzzToken feeds the token and revocation endpoints any form, next to a
// live grant and a code waiting to be exchanged whose secrets the fuzzer is
// not given: every request is refused as an *Error with an RFC 6749 code, a
// status and a description, and none of them changes the grant.
func FuzzToken(f *testing.F) {
	ctx := context.Background()
	db := storetest.Open(f, storetest.SQLite)
	s, err := New(Options{Issuer: "https://tb.example", DB: db})
	if err != nil {
		f.Fatal(err)
	}
	const redirect = "http://127.0.0.1/callback"
	if err := db.CreateOAuthClient(ctx, &store.OAuthClient{ID: "tbcl_x", Name: "X", RedirectURIs: redirect, CreatedAt: store.Now()}); err != nil {
		f.Fatal(err)
	}
	u, err := db.CreateUser(ctx, "fuzz@example.com", "F", "hash")
	if err != nil {
		f.Fatal(err)
	}
	w, err := db.CreateWorkspace(ctx, u.ID, "W")
	if err != nil {
		f.Fatal(err)
	}
	code := func(verifier string) string {
		sum := sha256.Sum256([]byte(verifier))
		req, err := s.ParseAuthorize(ctx, url.Values{"client_id": {"tbcl_x"}, "redirect_uri": {redirect}, "response_type": {"code"},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}})
		if err != nil {
			f.Fatal(err)
		}
		to, err := s.Approve(ctx, req, u.ID, w.ID)
		if err != nil {
			f.Fatal(err)
		}
		back, _ := url.Parse(to)
		return back.Query().Get("code")
	}
	verifier := strings.Repeat("v", 43)
	if _, _, err := s.Token(ctx, url.Values{"client_id": {"tbcl_x"}, "grant_type": {"authorization_code"}, "code": {code(verifier)}, "code_verifier": {verifier}}); err != nil {
		f.Fatal(err)
	}
	grants, err := db.OAuthGrants(ctx, u.ID, w.ID)
	if err != nil || len(grants) != 1 {
		f.Fatalf("grants %v %v", grants, err)
	}
	pending := code(strings.Repeat("p", 43))

	f.Add("client_id=tbcl_x&grant_type=authorization_code&code=" + pending + "&code_verifier=" + strings.Repeat("w", 43))
	f.Add("client_id=tbcl_x&grant_type=authorization_code&code=" + pending + "&code_verifier=short")
	f.Add("client_id=tbcl_x&grant_type=authorization_code&code=tbc_nope&code_verifier=" + verifier + "&redirect_uri=http%3A%2F%2Fevil.example")
	f.Add("client_id=tbcl_x&grant_type=refresh_token&refresh_token=tbr_nope")
	f.Add("client_id=tbcl_x&grant_type=client_credentials")
	f.Add("client_id=tbcl_x&grant_type=refresh_token&resource=https%3A%2F%2Fother.example%2Fmcp")
	f.Add("grant_type=authorization_code")
	f.Add("client_id=tbcl_x&token=tba_nope&token_type_hint=access_token")
	f.Add("")
	codes := map[string]bool{"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unsupported_grant_type": true, "invalid_target": true}
	f.Fuzz(func(t *testing.T, raw string) {
		form, err := url.ParseQuery(raw)
		if err != nil {
			return // the handler refuses a body that is not a form before this
		}
		_, _, err = s.Token(ctx, form)
		var oe *Error
		if !errors.As(err, &oe) || !codes[oe.Code] || oe.Description == "" || (oe.Status != http.StatusBadRequest && oe.Status != http.StatusUnauthorized) {
			t.Fatalf("Token(%q) = %v (%T); want a refusal with an RFC 6749 code and a description", raw, err, err)
		}
		if _, err := s.Revoke(ctx, form); err != nil && !errors.As(err, &oe) {
			t.Fatalf("Revoke(%q) = %v (%T)", raw, err, err)
		}
		now, err := db.OAuthGrants(ctx, u.ID, w.ID)
		if err != nil || len(now) != 1 || now[0].ID != grants[0].ID {
			t.Fatalf("after %q the workspace's grants are %+v (%v), were %+v", raw, now, err, grants)
		}
	})
}
