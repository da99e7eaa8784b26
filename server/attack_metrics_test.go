package server_test

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// getMetrics asks the main address for /metrics with extra headers.
func getMetrics(t *testing.T, env *servertest.Env, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", env.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMetricsAreNotPublic: /metrics on the main address (no --metrics-listen) told anyone who
// could reach the server how many browsers and daemons are connected, how many calls ran and
// how many approvals wait. It now answers only this computer: a reverse proxy in front (a
// loopback peer sending forwarding headers, or a trusted proxy recording a client from
// elsewhere) gets 403 metrics_local_only saying to use --metrics-listen.
func TestMetricsAreNotPublic(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	if st, body := getMetrics(t, env, nil); st != 200 || !strings.Contains(body, "tabbridge_browsers_connected") {
		t.Fatalf("a scrape from this computer: %d %.200s", st, body)
	}
	for _, h := range []map[string]string{
		{"X-Forwarded-For": "203.0.113.9"},
		{"Forwarded": "for=203.0.113.9"},
		{"X-Real-Ip": "203.0.113.9"},
		{"Via": "1.1 caddy"},
	} {
		st, body := getMetrics(t, env, h)
		if code, msg := servertest.ErrorOf([]byte(body)); st != 403 || code != "metrics_local_only" || !strings.Contains(msg, "--metrics-listen") {
			t.Errorf("through a proxy not trusted (%v): %d %.200s", h, st, body)
		}
	}
	proxied := servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	if st, body := getMetrics(t, proxied, map[string]string{"X-Forwarded-For": "127.0.0.1, 203.0.113.9"}); st != 403 {
		t.Errorf("a client elsewhere through a trusted proxy: %d %.200s", st, body)
	}
	if st, _ := getMetrics(t, proxied, map[string]string{"X-Forwarded-For": "127.0.0.1"}); st != 200 {
		t.Errorf("a client on this computer through a trusted proxy: %d", st)
	}
}
