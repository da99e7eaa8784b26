package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestRevokeDuringADaemonsAdmissionTakes: a machine revoked after its
// daemon's token was accepted but before its link is registered (where the
// revoke's disconnect finds nothing to close) is still cut off: the link
// closes at once and the daemon, dialling again, is refused.
func TestRevokeDuringADaemonsAdmissionTakes(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &created)
	revoked := make(chan int, 1)
	var once sync.Once
	t.Cleanup(server.SetAfterDaemonAuth(func(id string) {
		once.Do(func() {
			status, _ := person.Do("DELETE", "/api/machines/"+id, nil)
			revoked <- status
		})
	}))

	d, err := daemon.New(daemon.Options{Server: env.URL, Token: created.Token, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = d.Close(sctx)
	}()
	if status := <-revoked; status != 204 {
		t.Fatalf("revoke: %d", status)
	}
	if err := <-served; !errors.Is(err, daemon.ErrRefused) {
		t.Fatalf("the daemon of a machine revoked during its admission: Serve returned %v, want ErrRefused", err)
	}
	var list struct{ Machines []any }
	person.MustJSON("GET", "/api/machines", nil, 200, &list)
	if len(list.Machines) != 0 {
		t.Fatalf("machines after the revoke: %+v", list.Machines)
	}
}
