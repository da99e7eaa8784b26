package sitetools

import (
	"errors"
	"testing"
)

func TestNormalizeOrigin(t *testing.T) {
	ok := map[string]string{
		"https://example.com":             "https://example.com",
		"HTTPS://Example.COM/":            "https://example.com",
		"https://example.com:443":         "https://example.com",
		"http://example.com:80":           "http://example.com",
		"http://example.com:8080":         "http://example.com:8080",
		"https://example.com:0443":        "https://example.com",
		"http://127.0.0.1:3000":           "http://127.0.0.1:3000",
		"http://[::1]:3000":               "http://[::1]:3000",
		"http://[::1]":                    "http://[::1]",
		"https://bücher.example":          "https://xn--bcher-kva.example",
		"  https://app.example.com  ":     "https://app.example.com",
		"https://example.com.":            "https://example.com",
		"http://localhost:5173":           "http://localhost:5173",
		"https://sub.domain.example.org/": "https://sub.domain.example.org",
	}
	for in, want := range ok {
		got, err := NormalizeOrigin(in)
		if err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{
		"", "example.com", "chrome://extensions", "file:///etc/passwd", "chrome-extension://abc",
		"ftp://example.com", "https://example.com/path", "https://example.com/?q=1", "https://example.com/#x",
		"https://user:pw@example.com", "https://example.com:", "https://example.com:99999", "https://example.com:x",
		"https://", "javascript:alert(1)", "data:text/html,hi", "https://exa mple.com", "https:example.com",
		"https://example.com?", "http://" + string(make([]byte, 400)),
	}
	for _, in := range bad {
		if got, err := NormalizeOrigin(in); !errors.Is(err, ErrOrigin) {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want ErrOrigin", in, got, err)
		}
	}
}

func FuzzNormalizeOrigin(f *testing.F) {
	for _, s := range []string{"https://example.com", "http://[::1]:80", "HTTPS://Ex.com:443/", "https://bücher.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormalizeOrigin(in)
		if err != nil {
			return
		}
		again, err := NormalizeOrigin(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
	})
}
