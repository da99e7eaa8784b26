package relay_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

type serverOptions = server.Options

type benchRig struct {
	b      *testing.B
	env    *servertest.Env
	person *servertest.Client
	d      *daemon.Daemon
}

func newBenchRig(b *testing.B) *benchRig {
	env := servertest.Start(b, storetest.SQLite, nil)
	r := &benchRig{b: b, env: env, person: env.Person(b, "bench@example.com")}
	var m struct {
		Token string `json:"token"`
	}
	r.person.MustJSON("POST", "/api/machines", map[string]string{"name": "bench"}, 201, &m)
	d, err := daemon.New(daemon.Options{Server: env.URL, Token: m.Token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Serve(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		d.Close(sctx)
	})
	r.d = d
	return r
}

func (r *benchRig) waitListed(id string) {
	testutil.Eventually(r.b, wait, func() bool {
		st, _ := r.person.Do("POST", "/api/sessions/"+id+"/viewer-ticket", map[string]bool{"watchOnly": true})
		return st == 201
	}, "session never listed")
}

// rawViewer opens an interactive viewer socket that acknowledges every
// frame at once.
func (r *benchRig) rawViewer(id string) *websocket.Conn {
	var tk struct{ URL string }
	r.person.MustJSON("POST", "/api/sessions/"+id+"/viewer-ticket", map[string]bool{"watchOnly": false}, 201, &tk)
	v, _, err := websocket.DefaultDialer.Dial(strings.Replace(r.env.URL, "http", "ws", 1)+tk.URL, http.Header{"Origin": {r.env.Opts.PublicURL}})
	if err != nil {
		r.b.Fatal(err)
	}
	return v
}

func listen(b *testing.B) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }
