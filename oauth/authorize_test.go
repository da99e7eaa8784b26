package oauth

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// FuzzParseAuthorize feeds arbitrary authorization requests for a
// registered client: whatever comes in, a redirect only ever goes to a
// registered redirect URI and carries iss, and an accepted request has a
// PKCE S256 challenge.
func FuzzParseAuthorize(f *testing.F) {
	db := storetest.Open(f, storetest.SQLite)
	s, err := New(Options{Issuer: "https://tb.example", DB: db})
	if err != nil {
		f.Fatal(err)
	}
	const registered = "http://127.0.0.1/callback"
	if err := db.CreateOAuthClient(context.Background(), &store.OAuthClient{ID: "tbcl_x", Name: "X", RedirectURIs: registered + "\nhttps://app.example/cb", CreatedAt: store.Now()}); err != nil {
		f.Fatal(err)
	}
	f.Add("client_id=tbcl_x&redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcallback&response_type=code&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=a")
	f.Add("client_id=tbcl_x&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&response_type=token")
	f.Add("client_id=tbcl_x&redirect_uri=https%3A%2F%2Fevil.example%2Fcb")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q.Set("client_id", "tbcl_x") // only the registered client reaches the interesting checks
		req, err := s.ParseAuthorize(context.Background(), q)
		var re *RedirectError
		switch {
		case errors.As(err, &re):
			u, perr := url.Parse(re.URL)
			if perr != nil || u.Query().Get("iss") != "https://tb.example" || u.Query().Get("error") == "" {
				t.Fatalf("error redirect %q", re.URL)
			}
			if !redirectMatches(registered, strings.SplitN(re.URL, "?", 2)[0]) && !strings.HasPrefix(re.URL, "https://app.example/cb?") {
				t.Fatalf("redirected to an unregistered URI: %q", re.URL)
			}
		case err != nil:
			var oe *Error
			if !errors.As(err, &oe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
		default:
			if !challengeRE.MatchString(req.Challenge) || req.Resource != "https://tb.example/mcp" {
				t.Fatalf("accepted %+v", req)
			}
			if !redirectMatches(registered, req.RedirectURI) && req.RedirectURI != "https://app.example/cb" {
				t.Fatalf("accepted redirect %q", req.RedirectURI)
			}
		}
	})
}
