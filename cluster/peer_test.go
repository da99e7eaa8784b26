package cluster_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestPeersTellWhetherAnythingWasSent: a peer not alive in the registry,
// or refusing the connection, fails with ErrNotSent (the caller may send
// elsewhere); one that dies mid-answer fails with ErrPeerGone only; a living
// one gets the secret and the request id.
func TestPeersTellWhetherAnythingWasSent(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	secret := cluster.InternalSecret([]byte("test-signing-key-0123456789abcdef"))
	var gotAuth, gotID string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotID = r.Header.Get("Authorization"), r.Header.Get(cluster.HeaderRequestID)
		if r.URL.Path == "/internal/die" {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("partial"))
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	refusing := closed.Addr().String()
	closed.Close()
	now := store.Now()
	for _, in := range []cluster.Instance{
		{ID: "live", Address: srv.Listener.Addr().String(), StartedAt: now, HeartbeatAt: now},
		{ID: "refusing", Address: refusing, StartedAt: now, HeartbeatAt: now},
		{ID: "stale", Address: srv.Listener.Addr().String(), StartedAt: now, HeartbeatAt: now.Add(-time.Hour)},
	} {
		if err := db.Create(&in).Error; err != nil {
			t.Fatal(err)
		}
	}
	p := cluster.NewPeers(cluster.PeerOptions{DB: db, Self: "me", Secret: secret})
	defer p.Close()
	ctx := cluster.WithRequestID(context.Background(), "rid-1")
	var out struct{ OK bool }
	if err := p.PostJSON(ctx, "live", "/internal/ok", struct{}{}, &out); err != nil || !out.OK {
		t.Fatalf("live peer: %v %+v", err, out)
	}
	if !cluster.CheckInternal(gotAuth, secret) || gotID != "rid-1" {
		t.Fatalf("the peer got Authorization %q and request id %q", gotAuth, gotID)
	}
	for _, id := range []string{"refusing", "stale", "never-registered"} {
		err := p.PostJSON(ctx, id, "/internal/ok", struct{}{}, nil)
		if !errors.Is(err, cluster.ErrPeerGone) || !errors.Is(err, cluster.ErrNotSent) {
			t.Errorf("%s: %v, want ErrPeerGone and ErrNotSent", id, err)
		}
	}
	err := p.PostJSON(ctx, "live", "/internal/die", struct{}{}, nil)
	if !errors.Is(err, cluster.ErrPeerGone) || errors.Is(err, cluster.ErrNotSent) {
		t.Errorf("a peer dying mid-answer: %v, want ErrPeerGone only", err)
	}
	if _, err := p.NewRequest(ctx, "GET", "/api/x", nil); err == nil {
		t.Error("a path outside /internal/ was accepted")
	}
}
