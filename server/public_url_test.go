package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestPublicURLIsASchemeAndHost: the web app, the extension's socket and
// OAuth live at the root of the server's host, so a public URL with a path
// (a proxy's prefix), a query, a fragment or credentials is refused at the
// start with what to give instead; a trailing slash is only trimmed.
func TestPublicURLIsASchemeAndHost(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	for _, u := range []string{"https://example.com/tabbridge", "https://example.com/tabbridge/", "https://example.com/?a=1", "https://example.com/#x", "https://user:pw@example.com"} {
		_, err := server.New(server.Options{DB: db, Key: make([]byte, 32), PublicURL: u})
		if err == nil || !strings.Contains(err.Error(), "scheme and host only") || !strings.Contains(err.Error(), "subdomain") {
			t.Errorf("public URL %s: %v, want a refusal saying to give a host of its own", u, err)
		}
	}
	for _, u := range []string{"https://tabbridge.example.com", "https://tabbridge.example.com/", "http://127.0.0.1:8080"} {
		srv, err := server.New(server.Options{DB: db, Key: make([]byte, 32), PublicURL: u, SingleInstance: true})
		if err != nil {
			t.Errorf("public URL %s refused: %v", u, err)
			continue
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}
