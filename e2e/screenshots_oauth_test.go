package e2e

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/tabbridge/tabbridge/server/servertest"
)

// oauthShots captures the consent page an MCP client opens, and the
// workspace page with a connected app.
func oauthShots(t *testing.T, env *servertest.Env, owner *servertest.Client, ws string, capture func(shot)) {
	reg, err := oauthex.RegisterClient(context.Background(), env.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		ClientName: "Claude Code (tabbridge)", RedirectURIs: []string{"http://localhost/callback"}, TokenEndpointAuthMethod: "none"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"client_id": {reg.ClientID}, "redirect_uri": {"http://localhost:52011/callback"}, "response_type": {"code"},
		"state": {"s"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
	capture(shot{"oauth-consent", "An MCP client asks to connect (no token pasted): who asks, from where, for which workspace",
		visit(env.URL+"/oauth/authorize?"+q.Encode(), "#consent-allow")})
	if _, _, err := env.OAuthMCP(t, "", owner.Allow(ws)); err != nil {
		t.Fatal(err)
	}
	capture(shot{"workspace-connected", "A workspace with a connected app beside its tokens, and the commands that connect one",
		visit(env.URL+"/workspaces/"+ws, "#clients .list")})
}
