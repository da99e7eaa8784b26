package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// TestRefusedGoesOnlyToAServerThatTakesIt: the daemon tells the server of
// input its program did not read ("refused") only when the server named
// that message in its 101 (wire.FeaturesHeader); a server from before the
// message closes the link on a control type it does not know, so to one
// that does not name it the daemon sends none, and the link stays as it
// was. Each server here types two inputs of wire.MaxInput into a program
// that reads nothing (the second is refused on the machine), then stops
// the program: the exit comes after any refusal on the link.
func TestRefusedGoesOnlyToAServerThatTakesIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features string
		want     bool
	}{
		{"a server that takes it", wire.FeatureRefused, true},
		{"a server that names others", "later-message, " + wire.FeatureRefused + ",more", true},
		{"an older server", "", false},
		{"a server that names others only", "refusedx, later-message", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type seen struct {
				controls []wire.Control
				err      error
			}
			result := make(chan seen, 1)
			index := make(chan uint32, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var hdr http.Header
				if tc.features != "" {
					hdr = http.Header{wire.FeaturesHeader: {tc.features}}
				}
				conn, err := (&websocket.Upgrader{}).Upgrade(w, r, hdr)
				if err != nil {
					return
				}
				defer conn.Close()
				go func() { // the socket's one writer, beside its reader
					i := <-index
					for range 2 {
						in := wire.AppendDaemonInput(nil, wire.Input{Session: i, Data: bytes.Repeat([]byte("x"), wire.MaxInput)})
						if conn.WriteMessage(websocket.BinaryMessage, in) != nil {
							return
						}
					}
				}()
				var got []wire.Control
				for {
					typ, p, err := conn.ReadMessage()
					if err != nil {
						result <- seen{got, err}
						return
					}
					if typ != websocket.TextMessage {
						continue
					}
					c, err := wire.DecodeFromDaemon(p)
					if err != nil {
						result <- seen{got, err}
						return
					}
					got = append(got, c)
					switch c.Type {
					case wire.TypeSession:
						select {
						case index <- c.Index:
						default:
						}
					case wire.TypeExit:
						result <- seen{got, nil}
						return
					}
				}
			}))
			defer srv.Close()
			logged := make(chan struct{}, 1)
			d, err := daemon.New(daemon.Options{Server: srv.URL, Token: "tbm_test", Logger: logOn("input refused", logged)})
			if err != nil {
				t.Fatal(err)
			}
			defer serving(d)()
			id, err := d.Start(daemon.Spec{Argv: []string{"sh", "-c", "stty raw -echo && exec sleep 600"}, Cols: 80, Rows: 24,
				Env: []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := d.Session(id)
			testutil.RequireReceive(t, testutil.WaitLong, logged) // the machine refused the second input
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			if err := s.Stop(sctx); err != nil {
				t.Fatal(err)
			}
			got := testutil.RequireReceive(t, testutil.WaitLong, result)
			if got.err != nil {
				t.Fatalf("the link failed before the exit: %v (controls %+v)", got.err, got.controls)
			}
			var refused []wire.Control
			for _, c := range got.controls {
				if c.Type == wire.TypeRefused {
					refused = append(refused, c)
				}
			}
			switch {
			case tc.want && (len(refused) != 1 || refused[0].Bytes != wire.MaxInput):
				t.Fatalf("features %q: want one refusal of %d bytes before the exit, got %+v", tc.features, wire.MaxInput, refused)
			case !tc.want && len(refused) != 0:
				t.Fatalf("features %q: the daemon sent %+v to a server that does not take it", tc.features, refused)
			}
		})
	}
}

// logOn is a logger that signals on ch when a line holding text is logged.
func logOn(text string, ch chan struct{}) *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), text) {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		return len(p), nil
	}), nil))
}
