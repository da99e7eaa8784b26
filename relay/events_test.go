package relay_test

import (
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/server"
)

// TestHubReportsMachineAndSessionEvents: the hub's hook hears a daemon come
// online, a session start, a viewer attach and leave, the session exit, and, when the machine is revoked, the
// session go and the machine go offline — each naming the person.
func TestHubReportsMachineAndSessionEvents(t *testing.T) {
	events := make(chan relay.Event, 64)
	r := newRig(t, func(o *server.Options) {
		o.Relay.OnEvent = func(e relay.Event) { events <- e }
	})
	var me struct{ User struct{ ID string } }
	r.person.MustJSON("GET", "/api/auth/me", nil, 200, &me)
	uid := me.User.ID
	next := func(typ string) relay.Event {
		t.Helper()
		timeout := time.After(wait)
		for {
			select {
			case e := <-events:
				if e.Type != typ {
					continue
				}
				if e.UserID != uid || e.MachineID != r.machineID {
					t.Fatalf("%s names user %q machine %q, want %q %q", typ, e.UserID, e.MachineID, uid, r.machineID)
				}
				return e
			case <-timeout:
				t.Fatalf("no %s event", typ)
			}
		}
	}
	next(relay.EventMachineOnline)
	id := r.start(80, 24, "burst", "10")
	if e := next(relay.EventSessionStarted); e.Session == nil || e.Session.ID != id || e.Session.Command[1] != "burst" {
		t.Fatalf("session.started %+v", e.Session)
	}
	r.waitDaemon(id, "BURST READY")
	v := r.viewer(id, true, false)
	if e := next(relay.EventSessionViewers); e.Session.ID != id || e.Session.Viewers != 1 {
		t.Fatalf("session.viewers on attach %+v", e.Session)
	}
	v.Close()
	if e := next(relay.EventSessionViewers); e.Session.Viewers != 0 {
		t.Fatalf("session.viewers on leaving %+v", e.Session)
	}
	sess, _ := r.d.Session(id)
	if err := sess.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if e := next(relay.EventSessionExited); !e.Session.Exited || e.Session.ExitCode != 3 {
		t.Fatalf("session.exited %+v", e.Session)
	}
	r.person.MustJSON("DELETE", "/api/machines/"+r.machineID, nil, 204, nil)
	// Disconnect closes the link before it tells of the sessions gone, and
	// the link's reader says machine.offline as it ends: either may come
	// first.
	seen := map[string]relay.Event{}
	timeout := time.After(wait)
	for len(seen) < 2 {
		select {
		case e := <-events:
			if e.Type == relay.EventSessionGone || e.Type == relay.EventMachineOffline {
				seen[e.Type] = e
			}
		case <-timeout:
			t.Fatalf("after the revoke only %v came, want session.gone and machine.offline", seen)
		}
	}
	if e := seen[relay.EventSessionGone]; e.Session == nil || e.Session.ID != id || e.UserID != uid {
		t.Fatalf("session.gone %+v", e)
	}
	if e := seen[relay.EventMachineOffline]; e.UserID != uid || e.MachineID != r.machineID {
		t.Fatalf("machine.offline %+v", e)
	}
}
