package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"go.uber.org/goleak"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/relaytest"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
	"github.com/tabbridge/tabbridge/terminal"
)

// prog is the test program (testdata/prog), built once.
var prog string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relaytest")
	if err != nil {
		panic(err)
	}
	prog = filepath.Join(dir, "prog")
	if out, err := exec.Command("go", "build", "-o", prog, "./testdata/prog").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build test program: %v\n%s", err, out)
		os.Exit(1)
	}
	testutil.VerifyNoLeaks(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// wait bounds each step of a terminal stream through the relay.
const wait = testutil.WaitLong

// refusedWait bounds how long a revoked daemon may take to be refused: its
// link closes at once and it dials again within its 50 ms backoff.
const refusedWait = 15 * time.Second

// rig is a real server, a person, a machine and its running daemon.
type rig struct {
	t         *testing.T
	env       *servertest.Env
	person    *servertest.Client
	machineID string
	token     string
	d         *daemon.Daemon
	links     chan bool // the daemon's link going up and down
	serveErr  chan error
	cancel    context.CancelFunc
}

// daemonQueue, when set, is the daemon's per-session queue for the next rig;
// daemonKeep, its number of exited sessions kept.
var (
	daemonQueue int64
	daemonKeep  int
	// daemonDial, when set, is how the next rig's daemon dials the server.
	daemonDial func(ctx context.Context, network, addr string) (net.Conn, error)
)

func newRig(t *testing.T, tweak func(*server.Options)) *rig {
	t.Helper()
	env := servertest.Start(t, storetest.SQLite, tweak)
	r := &rig{t: t, env: env, person: env.Person(t, "ada@example.com"), links: make(chan bool, 16)}
	var out struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
		Command string              `json:"command"`
	}
	r.person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &out)
	r.machineID, r.token = out.Machine.ID, out.Token
	r.startDaemon()
	return r
}

func (r *rig) startDaemon() {
	d, err := daemon.New(daemon.Options{
		Server: r.env.URL, Token: r.token, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Connected: func(up bool) { r.links <- up }, Queue: daemonQueue, KeepExited: daemonKeep, Dial: daemonDial,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.d, r.cancel, r.serveErr = d, cancel, make(chan error, 1)
	go func() { r.serveErr <- d.Serve(ctx) }()
	r.t.Cleanup(func() {
		cancel()
		<-r.serveErr
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := d.Close(sctx); err != nil {
			r.t.Error(err)
		}
	})
	r.awaitLink(true)
}

// holdLink takes the daemon's link down until releaseLink; sessions run on.
func (r *rig) holdLink() {
	r.t.Helper()
	r.cancel()
	r.serveErr <- <-r.serveErr // Serve has returned; releaseLink or the cleanup takes it
	r.awaitLink(false)
}

// releaseLink lets the daemon link again and waits until it is up.
func (r *rig) releaseLink() {
	r.t.Helper()
	<-r.serveErr
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.t.Cleanup(cancel) // runs before startDaemon's cleanup, which waits for Serve
	go func() { r.serveErr <- r.d.Serve(ctx) }()
	r.awaitLink(true)
}

func (r *rig) awaitLink(up bool) {
	r.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case got := <-r.links:
			if got == up {
				return
			}
		case <-timeout:
			r.t.Fatalf("daemon link never went %v", up)
		}
	}
}

// start runs prog with args in a new session and waits until the server
// lists it.
func (r *rig) start(cols, rows int, args ...string) string {
	r.t.Helper()
	id, err := r.d.Start(daemon.Spec{Argv: append([]string{prog}, args...), Cols: cols, Rows: rows,
		Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color"}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.awaitListed(id)
	return id
}

// awaitListed waits until the server lists session id: the daemon announces
// its sessions just after its link comes up, so a link being up is not enough.
func (r *rig) awaitListed(id string) {
	r.t.Helper()
	testutil.Eventually(r.t, wait, func() bool {
		var out struct{ Sessions []struct{ ID string } }
		r.person.MustJSON("GET", "/api/machines/"+r.machineID+"/sessions", nil, 200, &out)
		for _, s := range out.Sessions {
			if s.ID == id {
				return true
			}
		}
		return false
	}, fmt.Sprintf("session %s never listed", id))
}

// daemonScreen is the session's screen on the daemon, as a redraw.
func (r *rig) daemonScreen(id string) []byte {
	s, ok := r.d.Session(id)
	if !ok {
		r.t.Fatalf("no session %s on the daemon", id)
	}
	snap, err := s.Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	// Redraw alone can be behind what the daemon delivered, and then
	// catch up with nothing left to wake a wait on the viewer.
	return snap.Screen()
}

// waitDaemon waits until the daemon's screen shows text.
func (r *rig) waitDaemon(id, text string) {
	r.t.Helper()
	testutil.Eventually(r.t, wait, func() bool { return bytes.Contains(r.daemonScreen(id), []byte(text)) }, "the daemon's screen never showed the text")
}

func (r *rig) ticket(id string, watchOnly bool) string {
	r.t.Helper()
	var out struct{ URL string }
	r.person.MustJSON("POST", "/api/sessions/"+id+"/viewer-ticket", map[string]bool{"watchOnly": watchOnly}, 201, &out)
	return out.URL
}

func (r *rig) viewer(id string, watchOnly, slow bool) *relaytest.Viewer {
	r.t.Helper()
	v, _, err := relaytest.Dial(relaytest.URL(r.env.URL, r.ticket(id, watchOnly)), r.env.Opts.PublicURL, slow)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(v.Close)
	return v
}

// sameScreen waits until the viewer's screen is exactly the daemon's:
// both redraws are rendered cell by cell from their emulators, with
// colours, attributes, cursor, modes and title, so equal redraws mean equal
// screens.
func (r *rig) sameScreen(v *relaytest.Viewer, id string) {
	r.t.Helper()
	var last []byte
	err := v.Wait(wait, func() bool {
		got, err := v.Screen()
		if err != nil {
			return false
		}
		last = got.Redraw
		return bytes.Equal(normal(got.Cols, got.Rows, got.Redraw), normal(got.Cols, got.Rows, r.daemonScreen(id)))
	})
	if err != nil {
		r.t.Fatalf("viewer screen never matched the daemon's (%v):\nviewer %q\ndaemon %q", err, last, r.daemonScreen(id))
	}
	if bad := v.Stats().Violations; len(bad) > 0 {
		r.t.Fatalf("invalid stream: %v", bad)
	}
}

// normal is a redraw as a fresh emulator reproduces it: a redraw sets
// modes to their defaults explicitly, which an emulator then lists in its
// mode table, so two equal screens are compared after the same trip.
func normal(cols, rows int, redraw []byte) []byte {
	e := terminal.NewEmulator(cols, rows)
	defer e.Close()
	_, _ = e.Write(redraw)
	s, _ := e.Snapshot()
	return s.Redraw
}

func TestLateViewerSeesTheDaemonsScreen(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		args  []string
		ready string
	}{
		{[]string{"spinner"}, "SPIN DONE"},
		{[]string{"alt"}, "ALT READY"},
		{[]string{"colours"}, "COLOURS READY"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			id := r.start(100, 30, tc.args...)
			early := r.viewer(id, true, false) // watches from the start
			r.waitDaemon(id, tc.ready)
			late := r.viewer(id, true, false)
			r.sameScreen(late, id)
			r.sameScreen(early, id)
			if s := late.Stats(); s.Snapshots != 1 {
				t.Errorf("late viewer got %d snapshots, want 1", s.Snapshots)
			}
		})
	}
}

// TestBackpressure runs a flood with a slow viewer (no acks) and a fast one:
// the fast one gets every byte with no redraw, unaffected; the slow one's
// stream stays valid, is resynchronised with redraws, and once it keeps up
// ends on the exact screen.
func TestBackpressure(t *testing.T) {
	// The fast viewer feeds its own emulator, as slow as the daemon's while
	// the program writes at PTY speed, so its queue must absorb the
	// difference on this shared 2-core machine: the daemon's output runs
	// up to terminal.MaxLag (1 MiB) ahead of any emulator. The slow viewer
	// stops reading and overflows the 2 MiB memory cap; time plays no part
	// here (TestViewerQueueIsSizedByTime tests ViewerLag).
	r := newRig(t, func(o *server.Options) { o.Relay.ViewerQueue, o.Relay.ViewerLag = 2<<20, time.Minute })
	id := r.start(120, 40, "flood", "3000000")
	slow := r.viewer(id, true, true)
	fast := r.viewer(id, true, false)
	r.waitDaemon(id, "END")
	r.sameScreen(fast, id)
	fs := fast.Stats()
	if fs.Snapshots != 1 {
		t.Errorf("fast viewer got %d snapshots, want only the first", fs.Snapshots)
	}
	// It attached while the program ran at PTY speed: all after its first
	// snapshot came as output.
	if fs.OutputBytes < 1_000_000 || fs.Offset < 3_000_000 {
		t.Errorf("fast viewer got %d bytes of output and reached %d, want the flood's rest after its snapshot", fs.OutputBytes, fs.Offset)
	}
	ss := slow.Stats()
	if ss.Written > 500<<10 {
		t.Errorf("slow viewer was sent %d bytes without acknowledging any: %d snapshots, %d outputs of %d bytes", ss.Written, ss.Snapshots, ss.Outputs, ss.OutputBytes)
	}
	if err := slow.Release(); err != nil {
		t.Fatal(err)
	}
	r.sameScreen(slow, id)
	if ss := slow.Stats(); ss.Snapshots < 2 {
		t.Errorf("slow viewer got %d snapshots; its backlog should have been replaced by a redraw", ss.Snapshots)
	}
}

func TestEscArrivesAsALoneByte(t *testing.T) {
	r := newRig(t, nil)
	id := r.start(80, 24, "keys")
	v := r.viewer(id, false, false)
	r.waitDaemon(id, "KEYS READY")
	for _, key := range []string{"\x1b", "\x1b[A", "a", "\r", "\x03"} {
		if err := v.Type([]byte(key)); err != nil {
			t.Fatal(err)
		}
		r.waitDaemon(id, fmt.Sprintf("got %x\r", key)[:len(fmt.Sprintf("got %x", key))])
	}
	screen := string(r.daemonScreen(id))
	if !regexp.MustCompile(`got 1b\b`).MatchString(screen) || !strings.Contains(screen, "got 1b5b41") {
		t.Fatalf("keys did not arrive one by one: %q", screen)
	}
}

func TestViewerCannotChooseItsSession(t *testing.T) {
	r := newRig(t, func(o *server.Options) { o.OpenSignup = true })
	a := r.start(80, 24, "keys")
	b := r.start(80, 24, "keys")
	r.waitDaemon(a, "KEYS READY")
	r.waitDaemon(b, "KEYS READY")
	v := r.viewer(a, false, false)
	for _, forged := range []map[string]any{
		{"type": "resize", "cols": 90, "rows": 20, "sessionId": b, "session": b, "index": 2},
		{"type": "ack", "bytes": 0, "sessionId": b},
	} {
		if err := v.Control(forged); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Type([]byte("x")); err != nil {
		t.Fatal(err)
	}
	r.waitDaemon(a, "got 78")
	if bytes.Contains(r.daemonScreen(b), []byte("got")) {
		t.Fatal("input reached the session the viewer forged")
	}
	// Another person can neither get a ticket for the session nor use one.
	eve := signUp(t, r.env, "eve@example.com")
	status, body := eve.Do("POST", "/api/sessions/"+a+"/viewer-ticket", map[string]bool{"watchOnly": true})
	if status != 404 {
		t.Fatalf("another person's ticket: %d %s", status, body)
	}
}

func signUp(t *testing.T, env *servertest.Env, email string) *servertest.Client {
	t.Helper()
	c := env.NewClient(t)
	c.MustJSON("POST", "/api/auth/signup", map[string]string{"email": email, "name": "x", "password": "password-" + email}, 201, nil)
	return c
}

func TestWatchOnlyViewersCannotType(t *testing.T) {
	r := newRig(t, nil)
	id := r.start(80, 24, "keys")
	r.waitDaemon(id, "KEYS READY")
	watcher := r.viewer(id, true, false)
	if err := watcher.Type([]byte("w")); err != nil {
		t.Fatal(err)
	}
	typist := r.viewer(id, false, false)
	if err := typist.Type([]byte("t")); err != nil {
		t.Fatal(err)
	}
	r.waitDaemon(id, "got 74")
	r.sameScreen(watcher, id)
	if bytes.Contains(r.daemonScreen(id), []byte("got 77")) {
		t.Fatal("a watch-only viewer's keystroke reached the program")
	}
}

// TestSigningOutEndsItsViewers: a viewer opened with a ticket from a
// sign-in ends when the person signs out there; the session runs on.
func TestSigningOutEndsItsViewers(t *testing.T) {
	r := newRig(t, nil)
	id := r.start(80, 24, "keys")
	r.waitDaemon(id, "KEYS READY")
	v := r.viewer(id, false, false)
	r.sameScreen(v, id)
	r.person.MustJSON("POST", "/api/auth/signout", nil, 200, nil)
	select {
	case <-v.Done():
	case <-time.After(wait):
		t.Fatal("the viewer kept typing into the terminal after its sign-in ended")
	}
	s, ok := r.d.Session(id)
	if !ok || s.Input([]byte("x")) != nil {
		t.Fatal("signing out ended the session, not only its viewer")
	}
	r.waitDaemon(id, "got 78")
}

func TestServerRestartKeepsSessions(t *testing.T) {
	r := newRig(t, nil)
	id := r.start(80, 24, "keys")
	r.waitDaemon(id, "KEYS READY")
	v := r.viewer(id, false, false)
	r.sameScreen(v, id)
	r.env.Restart(t)
	r.awaitLink(false)
	<-v.Done()
	r.awaitLink(true)
	r.awaitListed(id)
	s, _ := r.d.Session(id)
	if err := s.Input([]byte("after")); err != nil { // the screen changes while no viewer watches
		t.Fatal(err)
	}
	r.waitDaemon(id, "got 6166746572")
	again := r.viewer(id, false, false)
	r.sameScreen(again, id)
	if err := again.Type([]byte("z")); err != nil {
		t.Fatal(err)
	}
	r.waitDaemon(id, "got 7a")
	r.sameScreen(again, id)
}

func TestRevokedMachineIsRefused(t *testing.T) {
	r := newRig(t, nil)
	r.person.MustJSON("DELETE", "/api/machines/"+r.machineID, nil, 204, nil)
	r.awaitLink(false)
	select {
	case err := <-r.serveErr:
		if !errors.Is(err, daemon.ErrRefused) {
			t.Fatalf("Serve returned %v, want ErrRefused", err)
		}
		r.serveErr <- err // for cleanup
	case <-time.After(refusedWait):
		t.Fatal("the daemon kept trying a revoked token")
	}
	c := r.env.Agent(t, r.token)
	status, body := c.Do("GET", "/ws/daemon", nil)
	if status != 401 || servertest.ErrorCode(body) != "machine_token_invalid" {
		t.Fatalf("revoked token: %d %s", status, body)
	}
}

// TestEveryByteBeforeExit: a program writes 4 MiB and exits at once; an
// attached viewer gets every byte, with no redraw in their place, and then
// the exit status.
func TestEveryByteBeforeExit(t *testing.T) {
	daemonQueue = 8 << 20
	r := newRig(t, func(o *server.Options) { o.Relay.ViewerQueue, o.Relay.ViewerLag = 8<<20, time.Minute })
	daemonQueue = 0
	id := r.start(80, 24, "burst", "4194304")
	r.waitDaemon(id, "BURST READY")
	v := r.viewer(id, false, false)
	r.sameScreen(v, id)
	if err := v.Type([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if err := v.Wait(wait, func() bool { return v.Stats().ExitCode != nil }); err != nil {
		s, _ := r.d.Session(id)
		snap, _ := s.Snapshot()
		st := v.Stats()
		t.Fatalf("no exit status: %v; viewer at %d (%d snapshots, %v), daemon at %d; screen %q", err, st.Offset, st.Snapshots, st.Violations, snap.Offset, snap.Redraw)
	}
	st := v.Stats()
	if *st.ExitCode != 3 {
		t.Fatalf("exit code %d, want 3", *st.ExitCode)
	}
	s, _ := r.d.Session(id)
	snap, _ := s.Snapshot()
	if st.Offset != snap.End() || st.Snapshots != 1 || st.OutputBytes < 4<<20 {
		t.Fatalf("viewer reached offset %d with %d snapshots and %d output bytes; the daemon is at %d",
			st.Offset, st.Snapshots, st.OutputBytes, snap.End())
	}
	got, _ := v.Screen()
	if daemon := normal(80, 24, snap.Screen()); !bytes.Equal(normal(80, 24, got.Redraw), daemon) || !bytes.Contains(daemon, []byte("BURST END")) {
		t.Fatalf("after exit the viewer's screen differs from the daemon's:\n%q\n%q", got.Redraw, daemon)
	}
	if len(st.Violations) > 0 {
		t.Fatal(st.Violations)
	}
}

// TestDaemonLinkBackpressure: with a tiny queue on the daemon's side the
// daemon discards output and sends redraws instead; the session is never
// held up and the viewer ends on the exact screen, even though the program
// goes quiet (exits) right after the redraw.
func TestDaemonLinkBackpressure(t *testing.T) {
	daemonQueue = 16 << 10
	r := newRig(t, nil)
	daemonQueue = 0
	id := r.start(80, 24, "burst", "2000000")
	r.waitDaemon(id, "BURST READY")
	v := r.viewer(id, false, false)
	r.sameScreen(v, id)
	if err := v.Type([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if err := v.Wait(wait, func() bool { return v.Stats().ExitCode != nil }); err != nil {
		t.Fatal(err)
	}
	r.sameScreen(v, id)
	t.Logf("viewer: %+v", v.Stats().Snapshots)
}

// TestExitedSessionsArePruned: a long-running daemon keeps only its newest
// exited sessions; older ones are forgotten and leave the server's list.
func TestExitedSessionsArePruned(t *testing.T) {
	daemonKeep = 1
	defer func() { daemonKeep = 0 }()
	r := newRig(t, nil)
	var ids []string
	for i := 0; i < 3; i++ {
		id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "echo done"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		s, _ := r.d.Session(id)
		<-s.Done()
	}
	testutil.Eventually(r.t, wait, func() bool {
		var out struct{ Sessions []struct{ ID string } }
		r.person.MustJSON("GET", "/api/machines/"+r.machineID+"/sessions", nil, 200, &out)
		return len(out.Sessions) == 1 && out.Sessions[0].ID == ids[2]
	}, "the server still lists more than the newest session")
	if _, ok := r.d.Session(ids[0]); ok {
		t.Fatal("the daemon still holds the oldest exited session")
	}
	if _, ok := r.d.Session(ids[2]); !ok {
		t.Fatal("the daemon forgot the newest exited session")
	}
}

// TestUnreadInputDoesNotBlockOtherSessions: a paste far larger than a
// session holds, into a program that never reads its input, is refused past
// that bound at the daemon; another session on the same daemon still gets
// its keystrokes, and the daemon's link stays up.
func TestUnreadInputDoesNotBlockOtherSessions(t *testing.T) {
	r := newRig(t, nil)
	stuck, err := r.d.Start(daemon.Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	r.awaitListed(stuck)
	id := r.start(80, 24, "keys")
	r.waitDaemon(id, "KEYS READY")
	paster := r.viewer(stuck, false, false)
	typist := r.viewer(id, false, false)
	// Whole lines: the line discipline holds them until the program reads.
	// Small frames: many of them, as a paste in pieces would be.
	lines := bytes.Repeat([]byte("pasted line\r"), 4<<10/12)
	for range 2 * terminal.DefaultInputQueue / len(lines) {
		if err := paster.Type(lines); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := r.d.Session(stuck)
	full := make(chan struct{})
	go func() { // the paste has reached the daemon once the queue is full
		for !errors.Is(s.Input([]byte("x")), terminal.ErrInputFull) {
			time.Sleep(5 * time.Millisecond)
		}
		close(full)
	}()
	select {
	case <-full:
	case <-time.After(wait):
		t.Fatal("the paste never filled the session's input queue (or Input blocked)")
	}
	if err := typist.Type([]byte("k")); err != nil {
		t.Fatal(err)
	}
	r.waitDaemon(id, "got 6b")
	for len(r.links) > 0 {
		if !<-r.links {
			t.Fatal("the daemon's link went down")
		}
	}
}

// TestBadAnnouncementIsIgnoredAlone: a daemon announcing one session
// outside the wire's limits keeps its link; its other sessions are listed
// and viewable. (The real daemon refuses to start such a session; an older
// or another daemon might still announce one.)
func TestBadAnnouncementIsIgnoredAlone(t *testing.T) {
	r := newRig(t, nil)
	d := r.rawDaemon("other")
	conn := d.conn
	session := func(id string, argv []string) []byte {
		return wire.Control{Type: wire.TypeSession, Index: uint32(len(id)), Session: &wire.SessionInfo{
			ID: id, Command: argv, StartedAt: time.Now(), Cols: 80, Rows: 24}}.Encode()
	}
	for _, msg := range [][]byte{
		session("toolong", make([]string, wire.MaxArgs+1)),
		session("good", []string{"sh"}),
		wire.Control{Type: wire.TypeSynced}.Encode(),
	} {
		if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(r.t, wait, func() bool {
		var out struct{ Sessions []struct{ ID string } }
		r.person.MustJSON("GET", "/api/machines/"+d.machineID+"/sessions", nil, 200, &out)
		return len(out.Sessions) == 1 && out.Sessions[0].ID == "good"
	}, "the server never listed only the good session")
	// The link is still up: a viewer's attaching asks the daemon for a redraw.
	r.viewer("good", true, false)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	typ, p, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("the daemon's link: %v", err)
	}
	if c, err := wire.DecodeFromServer(p); typ != websocket.TextMessage || err != nil || c.Type != wire.TypeRedraw || c.Index != 4 {
		t.Fatalf("server sent %q (%v), want a redraw of index 4", p, err)
	}
}

// TestExitWhileOfflineReachesViewers: a program that exits while its daemon
// is offline; when the daemon is back, its re-announcement says so and an
// attached viewer gets the exit status, after the final screen.
func TestExitWhileOfflineReachesViewers(t *testing.T) {
	r := newRig(t, nil)
	id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "echo READY; read x; echo BYE; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	r.awaitListed(id)
	r.waitDaemon(id, "READY")
	v := r.viewer(id, false, false)
	r.sameScreen(v, id)
	r.holdLink()
	if err := v.Wait(wait, func() bool { return !v.Stats().Online }); err != nil {
		t.Fatal("the viewer never heard the daemon went offline")
	}
	s, _ := r.d.Session(id)
	if err := s.Input([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(r.t, wait, func() bool { info, _ := r.d.Info(id); return info.Exited }, "the session never exited on the daemon")
	r.releaseLink()
	if err := v.Wait(wait, func() bool { return v.Stats().ExitCode != nil }); err != nil {
		t.Fatal("the viewer never heard of the exit that happened while the daemon was offline")
	}

	st := v.Stats()
	if *st.ExitCode != 7 {
		t.Fatalf("exit code %d, want 7", *st.ExitCode)
	}
	s, _ = r.d.Session(id)
	snap, _ := s.Snapshot()
	if st.ExitOffset != snap.End() {
		t.Fatalf("the exit status came at offset %d, before the final screen at %d", st.ExitOffset, snap.End())
	}
	r.sameScreen(v, id)
}
