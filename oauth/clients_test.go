package oauth

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedirectMatches(t *testing.T) {
	for _, c := range []struct {
		registered, got string
		want            bool
	}{
		{"http://127.0.0.1/callback", "http://127.0.0.1:51234/callback", true}, // RFC 8252 §7.3
		{"http://127.0.0.1:3000/callback", "http://127.0.0.1:4000/callback", true},
		{"http://localhost:3000/callback", "http://localhost:61000/callback", true}, // Claude Code
		{"http://[::1]/cb", "http://[::1]:9000/cb", true},
		{"http://127.0.0.1/callback", "http://127.0.0.1:5/other", false},
		{"http://127.0.0.1/callback", "http://localhost:5/callback", false},
		{"http://127.0.0.1/callback?a=1", "http://127.0.0.1:5/callback?a=2", false},
		{"http://127.0.0.1/callback", "http://user@127.0.0.1:5/callback", false},
		{"http://127.0.0.1/callback", "https://127.0.0.1:5/callback", false},
		{"https://app.example/cb", "https://app.example/cb", true},
		{"https://app.example/cb", "https://app.example:8443/cb", false},
		{"https://app.example/cb", "https://app.example/cb/", false},
		{"myapp:/oauth", "myapp:/oauth", true},
		{"myapp:/oauth", "myapp:/other", false},
	} {
		if got := redirectMatches(c.registered, c.got); got != c.want {
			t.Errorf("redirectMatches(%q, %q) = %v, want %v", c.registered, c.got, got, c.want)
		}
	}
}

func TestCheckRedirectURI(t *testing.T) {
	for uri, ok := range map[string]bool{
		"http://127.0.0.1:3000/cb": true, "http://localhost/cb": true, "http://[::1]/cb": true,
		"https://app.example/cb": true, "com.example.app:/oauth": true,
		"http://app.example/cb": false, "https://app.example/cb#x": false, "javascript:alert(1)": false,
		"data:text/html,x": false, "/relative": false, "https:///nohost": false, "": false,
		"https://\u0430pple.com/cb": false, "https://xn--pple-43d.com/cb": true, "https://a@app.example/cb": false,
		"https://*.app.example/cb": false, "https://app.example/c b": false, "cursor://anysphere.cursor-retrieval/cb": true,
	} {
		if err := checkRedirectURI(uri); (err == nil) != ok {
			t.Errorf("checkRedirectURI(%q) = %v, want ok=%v", uri, err, ok)
		}
	}
}

// TestShortCutsBetweenCharacters: an untrusted value quoted in an error is cut between
// characters, so the error stays UTF-8 text.
func TestShortCutsBetweenCharacters(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 60), strings.Repeat("a", 79) + "😀😀", strings.Repeat("x", 200)} {
		got := short(s)
		if !utf8.ValidString(got) || len(got) > 80+len("…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
			t.Errorf("short(%q) = %q", s, got)
		}
	}
	if got := short("client"); got != "client" {
		t.Errorf("short(client) = %q", got)
	}
}
