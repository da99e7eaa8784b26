package server_test

import (
	"net/http"
	"strings"
	"testing"

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
	c := env.NewClient(t)
	c.Origin = "https://evil.example"
	if status, b := c.Do("GET", "/ws/viewer?ticket=tbt_x", nil); status != 403 || servertest.ErrorCode(b) != "origin_not_allowed" {
		t.Fatalf("foreign origin: %d %s", status, b)
	}
	c.Origin = env.Opts.PublicURL
	if status, b := c.Do("GET", "/ws/viewer?ticket=tbt_x", nil); status != 401 || servertest.ErrorCode(b) != "ticket_invalid" {
		t.Fatalf("forged ticket: %d %s", status, b)
	}
}
