package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/daemon/daemontest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/relay/relaytest"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// terminalRig is a person with a machine whose real daemon runs one session.
type terminalRig struct {
	env     *servertest.Env
	person  *servertest.Client
	session string
}

func newTerminalRig(t *testing.T) *terminalRig {
	t.Helper()
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &created)
	d := daemontest.Start(t, env.URL, created.Token, 10*time.Millisecond)
	id, err := d.Start(daemon.Spec{Argv: []string{"sh", "-c", "read x"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	r := &terminalRig{env: env, person: person, session: id}
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		status, _ := person.Do("POST", "/api/sessions/"+id+"/viewer-ticket", map[string]bool{"watchOnly": true})
		return status == 201
	}, "the session is never listed")
	return r
}

// viewerTicket asks for a viewer ticket of the rig's session as c.
func (r *terminalRig) viewerTicket(t *testing.T, c *servertest.Client) string {
	t.Helper()
	var out struct{ URL string }
	c.MustJSON("POST", "/api/sessions/"+r.session+"/viewer-ticket", map[string]bool{}, 201, &out)
	return relaytest.URL(r.env.URL, out.URL)
}

// refusedDial dials a socket that must be refused before the upgrade and
// returns the status and error code.
func refusedDial(t *testing.T, conn *websocket.Conn, resp *http.Response, err error) (int, string) {
	t.Helper()
	if err == nil {
		conn.Close()
		t.Fatal("the socket opened")
	}
	if resp == nil {
		t.Fatalf("dial: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, servertest.ErrorCode(body)
}

// TestTicketsAskedForBeforeSignOutOpenNothing: tickets asked for just before
// signing out and redeemed just after open neither the extension socket nor
// a terminal viewer (401 signed_out), and are not spent by the refusal.
func TestTicketsAskedForBeforeSignOutOpenNothing(t *testing.T) {
	r := newTerminalRig(t)
	laptop := r.env.NewClient(t)
	laptop.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "ada@example.com", "password": "password-ada@example.com"}, 200, nil)
	ext := ticketFor(t, laptop)
	view := r.viewerTicket(t, laptop)
	laptop.MustJSON("POST", "/api/auth/signout", nil, 200, nil)

	b, resp, err := bridgetest.Dial(context.Background(), r.env.URL, ext, extOrigin)
	var conn *websocket.Conn
	if b != nil {
		conn = b.Conn
	}
	if status, code := refusedDial(t, conn, resp, err); status != 401 || code != "signed_out" {
		t.Fatalf("extension socket with a ticket of an ended sign-in: %d %s, want 401 signed_out", status, code)
	}
	conn, resp, err = websocket.DefaultDialer.Dial(view, http.Header{"Origin": {r.env.Opts.PublicURL}})
	if status, code := refusedDial(t, conn, resp, err); status != 401 || code != "signed_out" {
		t.Fatalf("viewer socket with a ticket of an ended sign-in: %d %s, want 401 signed_out", status, code)
	}
}

// TestSignOutDuringTheDialClosesTheSocket: a sign-out that lands between a
// ticket's redeem and the socket it opens (after the sign-out's own sweep of
// what the sign-in opened) still ends the socket, at once: the extension's
// with CloseSignedOut, the viewer's with relay.CloseSignedOut.
func TestSignOutDuringTheDialClosesTheSocket(t *testing.T) {
	r := newTerminalRig(t)
	signIn := func() *servertest.Client {
		c := r.env.NewClient(t)
		c.MustJSON("POST", "/api/auth/signin", map[string]string{"email": "ada@example.com", "password": "password-ada@example.com"}, 200, nil)
		return c
	}
	signOutOnRedeem := func(c *servertest.Client) {
		restore := server.SetAfterRedeem(func() {
			c.MustJSON("POST", "/api/auth/signout", nil, 200, nil)
		})
		t.Cleanup(restore)
	}

	laptop := signIn()
	tk := ticketFor(t, laptop)
	signOutOnRedeem(laptop)
	b, resp, err := bridgetest.Dial(context.Background(), r.env.URL, tk, extOrigin)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer b.Conn.Close()
	if code, reason, err := b.Closed(testutil.WaitShort); err != nil || code != bridge.CloseSignedOut {
		t.Fatalf("the extension socket of a sign-in that ended during its dial: %d %q %v, want %d", code, reason, err, bridge.CloseSignedOut)
	}

	desk := signIn()
	view := r.viewerTicket(t, desk)
	signOutOnRedeem(desk)
	v, resp, err := relaytest.Dial(view, r.env.Opts.PublicURL, false)
	if err != nil {
		t.Fatalf("dial viewer: %v (%v)", err, resp)
	}
	defer v.Close()
	select {
	case <-v.Done():
	case <-time.After(testutil.WaitShort):
		t.Fatal("the viewer of a sign-in that ended during its dial is still open")
	}
	var ce *websocket.CloseError
	if err := v.Stats().Err; !errors.As(err, &ce) || ce.Code != relay.CloseSignedOut || !strings.Contains(ce.Text, "signed out") {
		t.Fatalf("the viewer closed with %v, want close code %d", err, relay.CloseSignedOut)
	}
}
