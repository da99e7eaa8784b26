package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/relay/relaytest"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

func TestMachinesAPI(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, kind storetest.Kind) {
		env := servertest.Start(t, kind, func(o *server.Options) { o.OpenSignup = true })
		ada := env.Person(t, "ada@example.com")
		var created struct {
			Machine struct {
				ID     string `json:"id"`
				Name   string `json:"name"`
				Online bool   `json:"online"`
			} `json:"machine"`
			Token   string `json:"token"`
			Command string `json:"command"`
		}
		ada.MustJSON("POST", "/api/machines", map[string]string{"name": " laptop "}, 201, &created)
		if created.Machine.Name != "laptop" || !strings.HasPrefix(created.Token, "tbm_") || created.Machine.Online {
			t.Fatalf("created %+v", created)
		}
		// The token never goes into the command: enroll reads it on stdin.
		if want := "tabbridge daemon enroll --server " + env.Opts.PublicURL; created.Command != want {
			t.Fatalf("command %q, want %q", created.Command, want)
		}
		if status, body := ada.Do("POST", "/api/machines", map[string]string{"name": ""}); status != 400 {
			t.Fatalf("blank name: %d %s", status, body)
		}
		ada.MustJSON("PATCH", "/api/machines/"+created.Machine.ID, map[string]string{"name": "desk"}, 200, nil)
		var list struct {
			Machines []struct{ ID, Name string } `json:"machines"`
		}
		ada.MustJSON("GET", "/api/machines", nil, 200, &list)
		if len(list.Machines) != 1 || list.Machines[0].Name != "desk" {
			t.Fatalf("list %+v", list)
		}
		var sessions struct{ Sessions []any }
		ada.MustJSON("GET", "/api/machines/"+created.Machine.ID+"/sessions", nil, 200, &sessions)
		if len(sessions.Sessions) != 0 {
			t.Fatalf("sessions %+v", sessions)
		}
		if status, _ := ada.Do("POST", "/api/sessions/nope/viewer-ticket", map[string]bool{"watchOnly": true}); status != 404 {
			t.Fatalf("ticket for an unknown session: %d", status)
		}

		// Another person sees none of it.
		eve := env.NewClient(t)
		eve.MustJSON("POST", "/api/auth/signup", map[string]string{"email": "eve@example.com", "name": "eve", "password": "password-eve"}, 201, nil)
		for _, req := range [][2]string{{"GET", "/sessions"}, {"PATCH", ""}, {"DELETE", ""}} {
			var body any
			if req[0] == "PATCH" {
				body = map[string]string{"name": "mine"}
			}
			if status, b := eve.Do(req[0], "/api/machines/"+created.Machine.ID+req[1], body); status != 404 {
				t.Fatalf("%s by another person: %d %s", req[0], status, b)
			}
		}

		// The token opens the daemon socket's door until it is revoked.
		daemon := env.Agent(t, created.Token)
		if status, b := daemon.Do("GET", "/ws/daemon", nil); status != http.StatusUpgradeRequired {
			t.Fatalf("live token without upgrade: %d %s", status, b)
		}
		ada.MustJSON("DELETE", "/api/machines/"+created.Machine.ID, nil, 204, nil)
		if status, b := daemon.Do("GET", "/ws/daemon", nil); status != 401 || servertest.ErrorCode(b) != "machine_token_invalid" {
			t.Fatalf("revoked token: %d %s", status, b)
		}
		ada.MustJSON("GET", "/api/machines", nil, 200, &list)
		if len(list.Machines) != 0 {
			t.Fatalf("revoked machine still listed: %+v", list)
		}
	})
}

func TestViewerSocketChecksOriginAndTicket(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	ws := relaytest.URL(env.URL, "/ws/viewer?ticket=tbt_x")
	conn, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {"https://evil.example"}})
	if status, code := refusedDial(t, conn, resp, err); status != 403 || code != "origin_not_allowed" {
		t.Fatalf("foreign origin: %d %s", status, code)
	}
	conn, resp, err = websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {env.Opts.PublicURL}})
	if status, code := refusedDial(t, conn, resp, err); status != 401 || code != "ticket_invalid" {
		t.Fatalf("forged ticket: %d %s", status, code)
	}
}

// TestOnlyARealDialSpendsATicket: a plain GET of the viewer socket (no
// upgrade) and a dial from a foreign origin are refused before the ticket
// is looked at, so the real dial after them still opens the viewer; the
// same for the extension socket.
func TestOnlyARealDialSpendsATicket(t *testing.T) {
	r := newTerminalRig(t)
	ws := r.viewerTicket(t, r.person)
	plain := r.env.NewClient(t)
	plain.Origin = r.env.Opts.PublicURL
	path := strings.TrimPrefix(ws, "ws"+strings.TrimPrefix(r.env.URL, "http"))
	if status, b := plain.Do("GET", path, nil); status != http.StatusUpgradeRequired || servertest.ErrorCode(b) != "websocket_required" {
		t.Fatalf("a plain GET: %d %s", status, b)
	}
	conn, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {"https://evil.example"}})
	if status, code := refusedDial(t, conn, resp, err); status != 403 || code != "origin_not_allowed" {
		t.Fatalf("foreign origin: %d %s", status, code)
	}
	v, resp, err := relaytest.Dial(ws, r.env.Opts.PublicURL, false)
	if err != nil {
		t.Fatalf("the real dial after a plain GET: %v (%v)", err, resp)
	}
	v.Close()

	// The extension socket's door is the same.
	ext := ticketFor(t, r.person)
	plain.Origin = extOrigin
	if status, b := plain.Do("GET", "/ws/extension?ticket="+ext, nil); status != http.StatusUpgradeRequired {
		t.Fatalf("a plain GET of the extension socket: %d %s", status, b)
	}
	if _, code := refused(t, r.env, ext, "https://evil.example"); code != "origin_not_allowed" {
		t.Fatalf("the extension socket from a page: %s", code)
	}
	extBrowserWith(t, r.env, ext, "after-a-plain-get")
}
