package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// instances starts n servers on one PostgreSQL database, each with its own
// pool and internal listener, as n processes would be.
func instances(t testing.TB, n int, tweak func(i int, o *server.Options)) []*servertest.Env {
	t.Helper()
	url := storetest.FreshPostgres(t)
	out := make([]*servertest.Env, n)
	for i := range out {
		out[i] = instanceOn(t, url, func(o *server.Options) {
			if tweak != nil {
				tweak(i, o)
			}
		})
	}
	return out
}

// instanceOn starts one more instance on the database at url.
func instanceOn(t testing.TB, url string, tweak func(o *server.Options)) *servertest.Env {
	t.Helper()
	db, err := store.Open(context.Background(), store.Options{DatabaseURL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return servertest.Start(t, storetest.SQLite, func(o *server.Options) {
		o.DB = db
		o.InternalAddress = "127.0.0.1:0"
		if tweak != nil {
			tweak(o)
		}
	})
}

// TestInternalTransport: an instance reaches another's internal listener
// with the shared secret, the request id travels, and a WebSocket route
// registered by other code dials through; without the secret the listener
// answers 401 with a clear message.
func TestInternalTransport(t *testing.T) {
	envs := instances(t, 2, nil)
	a, b := envs[0], envs[1]
	ctx := cluster.WithRequestID(context.Background(), "req-42")
	req, _ := a.Server.Peers().NewRequest(ctx, "GET", "/internal/v1/ping", nil)
	resp, err := a.Server.Peers().Do(ctx, b.Server.Instance(), req)
	if err != nil {
		t.Fatal(err)
	}
	var pong struct{ Instance, RequestID string }
	json.NewDecoder(resp.Body).Decode(&pong)
	resp.Body.Close()
	if pong.Instance != b.Server.Instance() || pong.RequestID != "req-42" {
		t.Fatalf("ping B from A: %+v", pong)
	}

	for _, auth := range []string{"", "Bearer wrong", "Bearer " + cluster.InternalSecret([]byte("another-key-0123456789abcdefghijkl"))} {
		r, _ := http.NewRequest("GET", "http://"+b.Server.InternalAddress()+"/internal/v1/ping", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(body), `"internal_unauthorized"`) || !strings.Contains(string(body), "signing key") {
			t.Fatalf("internal listener with %q: %d %s", auth, resp.StatusCode, body)
		}
	}

	up := websocket.Upgrader{}
	b.Server.HandleInternal("GET /internal/test/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, m, err := c.ReadMessage()
			if err != nil {
				return
			}
			c.WriteMessage(mt, append([]byte(cluster.RequestID(r.Context())+":"), m...))
		}
	}))
	conn, _, err := a.Server.Peers().DialWebSocket(ctx, b.Server.Instance(), "/internal/test/echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.WriteMessage(websocket.TextMessage, []byte("hi"))
	if _, m, err := conn.ReadMessage(); err != nil || string(m) != "req-42:hi" {
		t.Fatalf("echo through B: %q %v", m, err)
	}

	_, err = a.Server.Peers().Do(ctx, "no-such-instance", req)
	if !errors.Is(err, cluster.ErrPeerGone) {
		t.Fatalf("unknown instance: %v, want ErrPeerGone", err)
	}
}
