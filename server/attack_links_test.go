package server_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/daemon/daemontest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestABrowserIDIsOnlyItsPersons: a browser's id is the extension's say-so,
// so two people may present the same one (a copied profile, or one who
// learnt the other's). The instance registry records which instance holds
// each person's browsers (a peer's directory and a dead instance's clean-up
// read it); one person's browser must neither take over the other's record
// nor, leaving, erase it.
func TestABrowserIDIsOnlyItsPersons(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		env := servertest.Start(t, k, func(o *server.Options) { o.OpenSignup = true })
		alice := env.Person(t, "alice@example.com")
		bob := env.Person(t, "bob@example.com")
		aliceID, bobID := userIDOf(t, alice), userIDOf(t, bob)
		const same = "the-same-browser-id"
		links := func(uid string) []cluster.Link {
			l, err := env.Server.Registry().Links(context.Background(), cluster.LinkBrowser, uid)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		held := func(uid string) bool {
			for _, l := range links(uid) {
				if l.LinkID == same && l.UserID == uid {
					return true
				}
			}
			return false
		}
		extBrowser(t, env, alice, same)
		testutil.Eventually(t, testutil.WaitShort, func() bool { return held(aliceID) }, "alice's browser was never recorded")
		br, _ := extBrowser(t, env, bob, same)
		testutil.Eventually(t, testutil.WaitShort, func() bool { return held(bobID) }, "bob's browser was never recorded")
		if !held(aliceID) {
			t.Fatalf("bob's browser of the same id took over alice's record: alice %+v, bob %+v", links(aliceID), links(bobID))
		}
		br.Close()
		testutil.Eventually(t, testutil.WaitShort, func() bool { return !held(bobID) }, "bob's browser left but stays recorded")
		if !held(aliceID) {
			t.Fatalf("bob's browser leaving erased alice's record: %+v", links(aliceID))
		}
	})
}

// TestADaemonSessionIDIsOnlyItsPersons: a terminal session's id is its
// daemon's say-so too. After a restart (a deploy) every daemon announces its
// sessions again, in whatever order they reconnect: a daemon of Bob's that
// comes first with the id of one of Alice's sessions must not shut hers out.
func TestADaemonSessionIDIsOnlyItsPersons(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, func(o *server.Options) { o.OpenSignup = true })
	alice := env.Person(t, "alice@example.com")
	bob := env.Person(t, "bob@example.com")
	machine := func(c *servertest.Client, name string) (id, token string) {
		var m struct {
			Machine struct{ ID string } `json:"machine"`
			Token   string              `json:"token"`
		}
		c.MustJSON("POST", "/api/machines", map[string]string{"name": name}, 201, &m)
		return m.Machine.ID, m.Token
	}
	sessionsOf := func(c *servertest.Client, machine string) string {
		_, body := c.Do("GET", "/api/machines/"+machine+"/sessions", nil)
		return string(body)
	}
	aliceMachine, aliceToken := machine(alice, "alice-laptop")
	bobMachine, bobToken := machine(bob, "bob-laptop")
	link := daemontest.StartLink(t, env.URL, aliceToken, 10*time.Millisecond)
	sid, err := link.D.Start(daemon.Spec{Argv: []string{"sh", "-c", "read alice_program"}, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool { return strings.Contains(sessionsOf(alice, aliceMachine), sid) }, "alice's session was never listed")

	link.Hold()
	env.Restart(t)
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(env.URL, "http")+"/ws/daemon",
		http.Header{"Authorization": {"Bearer " + bobToken}, wire.InstallHeader: {"bob-daemon-install-1"}})
	if err != nil {
		var body []byte
		if resp != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		t.Fatalf("bob's daemon: %v %s", err, body)
	}
	defer conn.Close()
	for i, id := range []string{sid, "bob-own-session"} {
		msg := wire.Control{Type: wire.TypeSession, Index: uint32(i + 1), Session: &wire.SessionInfo{
			ID: id, Command: []string{"bob_program"}, StartedAt: time.Now(), Cols: 80, Rows: 24}}.Encode()
		if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.WriteMessage(websocket.TextMessage, wire.Control{Type: wire.TypeSynced}.Encode()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool { return strings.Contains(sessionsOf(bob, bobMachine), "bob-own-session") }, "bob's daemon's sessions were never listed")

	link.Release()
	testutil.Eventually(t, testutil.WaitShort, func() bool {
		got := sessionsOf(alice, aliceMachine)
		return strings.Contains(got, sid) && strings.Contains(got, "alice_program")
	}, "alice's session, announced again after the restart, was shut out by bob's daemon reporting its id first")
	if got := sessionsOf(bob, bobMachine); strings.Contains(got, "alice_program") || strings.Contains(got, aliceMachine) {
		t.Fatalf("bob's machine lists alice's session: %s", got)
	}
	if status, body := alice.Do("POST", "/api/sessions/"+sid+"/viewer-ticket", map[string]bool{"watchOnly": true}); status != http.StatusCreated {
		t.Fatalf("alice's viewer ticket for her own session: %d %s", status, body)
	}
}
