package server

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// TestAdaptedRequestsOwnTheirStrings sends requests one after another on
// one keep-alive connection through Fiber's adaptor, as agents' POSTs come,
// and checks that what the handler kept of each — a header, the method, the
// host, the query — still reads as sent once later requests reused
// fasthttp's buffers. Without ownStrings the kept strings change under the
// handler (a session id kept as a map key stopped matching itself).
func TestAdaptedRequestsOwnTheirStrings(t *testing.T) {
	type kept struct{ header, method, host, query string }
	var (
		mu   sync.Mutex
		seen []kept
	)
	retain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, kept{r.Header.Get("Mcp-Session-Id"), r.Method, r.Host, r.URL.RawQuery})
		mu.Unlock()
	})
	app := fiber.New(fiber.Config{DisableStartupMessage: true, Immutable: true})
	app.All("/mcp", adaptor.HTTPHandler(ownStrings(retain)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })

	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	const n = 40
	methods := []string{"POST", "GET", "DELETE", "PUT"}
	var want []kept
	for i := range n {
		k := kept{
			header: fmt.Sprintf("session-%04d-%s", i, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i%26:i%26+1]),
			method: methods[i%len(methods)],
			host:   fmt.Sprintf("host%02d.example", i),
			query:  fmt.Sprintf("q=%04d", i),
		}
		req, err := http.NewRequest(k.method, "http://"+ln.Addr().String()+"/mcp?"+k.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = k.host
		req.Header.Set("Mcp-Session-Id", k.header)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want = append(want, k)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("the handler saw %d requests, want %d", len(seen), n)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("request %d as kept after later requests: %+v, want %+v", i, seen[i], want[i])
		}
	}
}
