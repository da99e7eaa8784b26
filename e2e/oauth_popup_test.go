package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestOAuthConsentInThePopup answers the consent page where the person may
// well meet it: inside the extension's popup, which frames the web app. The
// framed page gets its sign-in, its form carries its CSRF token, and Allow
// sends the code to the client's loopback callback with iss.
func TestOAuthConsentInThePopup(t *testing.T) {
	env, b, _, person := ownerInExtensionBrowser(t)
	ws := person.Workspace("Popup work")

	cb := newCallback(t)
	reg, err := oauthex.RegisterClient(context.Background(), env.URL+"/oauth/register", &oauthex.ClientRegistrationMetadata{
		ClientName: "Popup agent", RedirectURIs: []string{cb.URL}, TokenEndpointAuthMethod: "none"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"client_id": {reg.ClientID}, "redirect_uri": {cb.URL}, "response_type": {"code"}, "state": {"popup"},
		"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}

	_, frame := openPopup(t, b, env)
	run(t, frame, "open the consent page in the frame",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.href = %q`, env.URL+"/oauth/authorize?"+q.Encode())))
	frame = b.appFrame(t, env.URL, "/oauth/authorize")
	run(t, frame, "allow, in the frame",
		chromedp.WaitVisible(chromedp.ID("consent-allow")),
		chromedp.SetValue(chromedp.ID("consent-workspace"), ws),
		chromedp.Click(chromedp.ID("consent-allow")),
	)
	select {
	case got := <-cb.codes:
		if got.Get("code") == "" || got.Get("state") != "popup" || got.Get("iss") != env.Opts.PublicURL {
			t.Fatalf("authorization response %v", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the framed consent never reached the callback%s", pageState(frame))
	}
}
