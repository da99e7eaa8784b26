package oauth

import "testing"

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
	} {
		if err := checkRedirectURI(uri); (err == nil) != ok {
			t.Errorf("checkRedirectURI(%q) = %v, want ok=%v", uri, err, ok)
		}
	}
}
