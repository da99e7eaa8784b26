package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/daemon/daemontest"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/relay/relaytest"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/terminal"
)

var (
	fwdProgOnce sync.Once
	fwdProg     string
	fwdProgErr  error
)

// termProg builds the relay's test program (relay/testdata/prog) once.
func termProg(t *testing.T) string {
	t.Helper()
	fwdProgOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tabbridge-fwd-prog")
		if err != nil {
			fwdProgErr = err
			return
		}
		fwdProg = filepath.Join(dir, "prog")
		if out, err := exec.Command("go", "build", "-o", fwdProg, "../relay/testdata/prog").CombinedOutput(); err != nil {
			fwdProgErr = fmt.Errorf("build the test program: %v\n%s", err, out)
		}
	})
	if fwdProgErr != nil {
		t.Fatal(fwdProgErr)
	}
	return fwdProg
}

// forwardRig is two instances on one database; a person's daemon linked to
// a, and the person signed in on both.
type forwardRig struct {
	t          *testing.T
	a, b       *servertest.Env
	onA, onB   *servertest.Client
	machine    string
	token      string
	d          *daemon.Daemon
	link       *daemontest.Link
	daemonOnA  bool
	instancesA string
}

func newForwardRig(t *testing.T, tweak func(*server.Options)) *forwardRig {
	t.Helper()
	a, b := twoInstances(t, func(o *server.Options) {
		o.InternalAddress = "127.0.0.1:0"
		o.Heartbeat, o.DeadAfter = 100*time.Millisecond, 500*time.Millisecond
		if tweak != nil {
			tweak(o)
		}
	})
	r := &forwardRig{t: t, a: a, b: b}
	r.onA = a.Person(t, "ada@example.com")
	r.onB = asOn(t, b, r.onA)
	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	r.onA.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &created)
	r.machine, r.token = created.Machine.ID, created.Token
	r.link = daemontest.StartLink(t, a.URL, r.token, 10*time.Millisecond)
	r.d = r.link.D
	return r
}

// start runs the test program with args and waits until instance b lists
// the session (asking a, which holds the daemon).
func (r *forwardRig) start(cols, rows int, args ...string) string {
	r.t.Helper()
	id, err := r.d.Start(daemon.Spec{Argv: append([]string{termProg(r.t)}, args...), Cols: cols, Rows: rows,
		Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}})
	if err != nil {
		r.t.Fatal(err)
	}
	testutil.Eventually(r.t, testutil.WaitMedium, func() bool {
		var out struct{ Sessions []struct{ ID string } }
		r.onB.MustJSON("GET", "/api/machines/"+r.machine+"/sessions", nil, 200, &out)
		for _, s := range out.Sessions {
			if s.ID == id {
				return true
			}
		}
		return false
	}, "instance b lists the session of a's daemon")
	return id
}

// viewerOnB dials a viewer at instance b.
func (r *forwardRig) viewerOnB(id string, watchOnly, slow bool) *relaytest.Viewer {
	r.t.Helper()
	var out struct{ URL string }
	r.onB.MustJSON("POST", "/api/sessions/"+id+"/viewer-ticket", map[string]bool{"watchOnly": watchOnly}, 201, &out)
	v, resp, err := relaytest.Dial(relaytest.URL(r.b.URL, out.URL), r.b.Opts.PublicURL, slow)
	if err != nil {
		r.t.Fatalf("dial the viewer at b: %v (%v)", err, resp)
	}
	r.t.Cleanup(v.Close)
	return v
}

func (r *forwardRig) daemonScreen(id string) []byte {
	s, ok := r.d.Session(id)
	if !ok {
		r.t.Fatalf("no session %s on the daemon", id)
	}
	snap, err := s.Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	return snap.Screen() // the Redraw alone can be behind what was delivered
}

func (r *forwardRig) waitDaemon(id, text string) {
	r.t.Helper()
	testutil.Eventually(r.t, testutil.WaitMedium, func() bool { return bytes.Contains(r.daemonScreen(id), []byte(text)) },
		"the daemon's screen shows "+text)
}

// sameScreen waits until the viewer shows exactly the daemon's screen.
func (r *forwardRig) sameScreen(v *relaytest.Viewer, id string) {
	r.t.Helper()
	norm := func(cols, rows int, redraw []byte) []byte {
		e := terminal.NewEmulator(cols, rows)
		defer e.Close()
		_, _ = e.Write(redraw)
		s, _ := e.Snapshot()
		return s.Redraw
	}
	err := v.Wait(testutil.WaitLong, func() bool {
		got, err := v.Screen()
		return err == nil && bytes.Equal(norm(got.Cols, got.Rows, got.Redraw), norm(got.Cols, got.Rows, r.daemonScreen(id)))
	})
	if err != nil {
		r.t.Fatalf("the viewer at b never showed the daemon's screen: %v", err)
	}
	if bad := v.Stats().Violations; len(bad) > 0 {
		r.t.Fatalf("invalid stream through the forward: %v", bad)
	}
}

// TestViewerForwardedToTheDaemonsInstance: a viewer at instance b of a
// daemon linked to instance a types into the program and sees its screen;
// a session's end reaches it after every byte.
func TestViewerForwardedToTheDaemonsInstance(t *testing.T) {
	r := newForwardRig(t, nil)
	var ms struct {
		Machines []struct {
			ID     string
			Online bool
		}
	}
	testutil.Eventually(t, testutil.WaitShort, func() bool { // a records the link just after the daemon is up
		r.onB.MustJSON("GET", "/api/machines", nil, 200, &ms)
		return len(ms.Machines) == 1 && ms.Machines[0].Online
	}, "b lists the machine online (its daemon is on a)")
	var renamed struct{ Machine struct{ Online bool } }
	r.onB.MustJSON("PATCH", "/api/machines/"+r.machine, map[string]string{"name": "laptop 2"}, 200, &renamed)
	if !renamed.Machine.Online {
		t.Fatal("renamed on b, the machine whose daemon is on a reads offline")
	}
	id := r.start(80, 24, "keys")
	v := r.viewerOnB(id, false, false)
	r.waitDaemon(id, "KEYS READY")
	for _, key := range []string{"a", "\x1b[A", "\r"} {
		if err := v.Type([]byte(key)); err != nil {
			t.Fatal(err)
		}
		r.waitDaemon(id, fmt.Sprintf("got %x", key))
	}
	r.sameScreen(v, id)

	end := r.start(80, 24, "burst", "20000") // exits with status 3 after the first key
	ev := r.viewerOnB(end, false, false)
	r.waitDaemon(end, "BURST READY")
	if err := ev.Type([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(testutil.WaitMedium, func() bool { return ev.Stats().ExitCode != nil }); err != nil {
		t.Fatalf("the exit never reached the viewer at b: %v\n%+v\ndaemon: %q", err, ev.Stats(), r.daemonScreen(end))
	}
	if st := ev.Stats(); *st.ExitCode != 3 || st.ExitOffset < 20000 {
		t.Fatalf("the viewer at b saw exit %d at offset %d; want 3 after all 20000 bytes", *st.ExitCode, st.ExitOffset)
	}
	r.sameScreen(ev, end)

	// Revoking the machine on b ends both viewers there: the session is gone.
	r.onB.MustJSON("DELETE", "/api/machines/"+r.machine, nil, 204, nil)
	for _, vw := range []*relaytest.Viewer{v, ev} {
		select {
		case <-vw.Done():
		case <-time.After(testutil.WaitMedium):
			t.Fatal("revoking the machine did not end a forwarded viewer")
		}
	}
}

// TestForwardedViewerBackpressure: through the forward, a viewer that does
// not acknowledge is sent no more than its window and its backlog is
// replaced by a redraw, while a fast viewer on the same forward gets every
// byte; both end on the daemon's exact screen.
func TestForwardedViewerBackpressure(t *testing.T) {
	// The program writes at a pace a forwarded viewer keeps up with even under
	// the race detector (there a burst at PTY speed outran the fast viewer's
	// own emulator by the whole 2 MiB, so it was redrawn for its own
	// slowness); the slow one stops reading and overflows the 2 MiB queue.
	r := newForwardRig(t, func(o *server.Options) { o.Relay.ViewerQueue, o.Relay.ViewerLag = 2<<20, time.Minute })
	id := r.start(120, 40, "paced", "3000000")
	slow := r.viewerOnB(id, false, true)
	fast := r.viewerOnB(id, true, false)
	r.waitDaemon(id, "BURST READY")
	if err := fast.Wait(testutil.WaitMedium, func() bool { return fast.Stats().Snapshots > 0 }); err != nil {
		t.Fatal(err)
	}
	if err := slow.Type([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if err := fast.Wait(testutil.WaitLong, func() bool { return fast.Stats().ExitCode != nil }); err != nil {
		t.Fatalf("the fast viewer never saw the burst end: %v", err)
	}
	r.sameScreen(fast, id)
	if fs := fast.Stats(); fs.Snapshots != 1 || fs.OutputBytes < 1_000_000 {
		t.Errorf("fast viewer: %d snapshots, %d bytes of output; want one snapshot and the burst as output", fs.Snapshots, fs.OutputBytes)
	}
	if ss := slow.Stats(); ss.Written > 500<<10 {
		t.Errorf("the slow viewer was sent %d bytes without acknowledging any; the window is 100 KB and a frame 256 KiB", ss.Written)
	}
	if err := slow.Release(); err != nil {
		t.Fatal(err)
	}
	r.sameScreen(slow, id)
	if ss := slow.Stats(); ss.Snapshots < 2 {
		t.Errorf("slow viewer got %d snapshots; its backlog should have been replaced by a redraw", ss.Snapshots)
	}
}

// TestForwardedViewerSeesItsInstanceGo: when the instance holding the
// daemon stops, the viewer at the other instance is told the machine is
// offline and its socket stays open; revoking the machine then ends it.
func TestForwardedViewerSeesItsInstanceGo(t *testing.T) {
	r := newForwardRig(t, nil)
	id := r.start(80, 24, "keys")
	v := r.viewerOnB(id, false, false)
	if err := v.Wait(testutil.WaitMedium, func() bool { return v.Stats().Online }); err != nil {
		t.Fatal(err)
	}
	r.link.Hold() // the daemon stays away: it would dial a again
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.a.Server.Shutdown(ctx)
	if err := v.Wait(testutil.WaitMedium, func() bool { return !v.Stats().Online }); err != nil {
		t.Fatalf("the viewer at b was not told the machine went offline: %v", err)
	}
	select {
	case <-v.Done():
		t.Fatalf("the viewer's socket closed: %v", v.Stats().Err)
	default:
	}
	r.onB.MustJSON("DELETE", "/api/machines/"+r.machine, nil, 204, nil)
	select {
	case <-v.Done():
	case <-time.After(testutil.WaitMedium):
		t.Fatal("revoking the machine did not end the waiting viewer")
	}
}

// TestPastesThroughTheForward: the input limit holds on the forwarding hop
// too. At instance b, a viewer of a daemon linked to a pastes exactly
// wire.MaxInput bytes, and they reach the program whole. A paste one byte
// over is refused at b with both sizes and never reaches a. Once the
// program stops reading, the paste that the machine cannot hand to it is
// refused by the daemon, and the refusal reaches the viewer at b. Through
// all of it the viewer's socket and the machine's link stay up.
func TestPastesThroughTheForward(t *testing.T) {
	r := newForwardRig(t, nil)
	script := fmt.Sprintf("stty raw -echo && printf 'READ''Y\\r\\n' && head -c %d | sha256sum && exec sleep 600", wire.MaxInput)
	id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", script}, Cols: 100, Rows: 10,
		Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LC_ALL=C"}})
	if err != nil {
		t.Fatal(err)
	}
	r.waitDaemon(id, "READY")
	v := r.viewerOnB(id, false, false)
	refusals := func() (out []wire.Control) {
		for _, c := range v.Stats().Controls {
			if c.Type == wire.TypeRefused {
				out = append(out, c)
			}
		}
		return out
	}
	paste := bytes.Repeat([]byte("pasted through the forward\r"), wire.MaxInput/27+1)

	if err := v.Type(paste[:wire.MaxInput+1]); err != nil {
		t.Fatal(err)
	}
	if err := v.Wait(testutil.WaitMedium, func() bool { return len(refusals()) == 1 }); err != nil {
		t.Fatalf("a paste over the limit at b was not refused: %v", err)
	}
	if c := refusals()[0]; c.Bytes != wire.MaxInput+1 || !strings.Contains(c.Reason, fmt.Sprint(wire.MaxInput)) {
		t.Fatalf("the refusal at b %+v does not give the paste's size and the limit", c)
	}

	whole := paste[:wire.MaxInput]
	if err := v.Type(whole); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(whole)
	r.waitDaemon(id, hex.EncodeToString(sum[:])) // the refused paste's first byte would have changed it

	// sleep reads nothing: the first paste fills what the machine holds
	// for it, the second is refused there and the viewer at b is told.
	for range 2 {
		if err := v.Type(whole); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Wait(testutil.WaitMedium, func() bool { return len(refusals()) == 2 }); err != nil {
		t.Fatalf("the daemon's refusal never reached the viewer at b: %v (%+v)", err, refusals())
	}
	if c := refusals()[1]; c.Bytes != wire.MaxInput || !strings.Contains(c.Reason, "not reading") {
		t.Fatalf("the daemon's refusal at b: %+v", c)
	}
	if err := v.Stats().Err; err != nil {
		t.Fatalf("the viewer's socket at b closed: %v", err)
	}
	if r.link.WentDown() {
		t.Fatal("the machine's link went down")
	}
}

// TestForwardedViewerHearsTheHoldersRefusal: a session at its viewers'
// bound refuses a viewer at another instance with the same close code and
// reason as one at its own, not a "dial again" that would loop.
func TestForwardedViewerHearsTheHoldersRefusal(t *testing.T) {
	r := newForwardRig(t, nil)
	id := r.start(80, 24, "keys")
	for range relay.MaxViewers {
		v := r.viewerOnB(id, true, false)
		if err := v.Wait(testutil.WaitMedium, func() bool { return v.Stats().Snapshots > 0 }); err != nil {
			t.Fatalf("a forwarded viewer within the bound: %v", err)
		}
	}
	extra := r.viewerOnB(id, true, false)
	select {
	case <-extra.Done():
	case <-time.After(testutil.WaitMedium):
		t.Fatal("the forwarded viewer over the bound is still open")
	}
	var ce *websocket.CloseError
	if err := extra.Stats().Err; !errors.As(err, &ce) || ce.Code != relay.CloseTooManyViewers || !strings.Contains(ce.Text, "viewers") {
		t.Fatalf("the forwarded viewer over the bound ended with %v, want close %d", err, relay.CloseTooManyViewers)
	}
}
