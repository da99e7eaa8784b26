package relay_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay"
	"github.com/tabbridge/tabbridge/relay/relaytest"
	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/server"
)

// rawDaemon is a daemon's socket driven by hand, for a machine of the rig's
// person: what a daemon with a stolen machine token can say.
type rawDaemon struct {
	t         *testing.T
	r         *rig
	conn      *websocket.Conn
	machineID string
}

func (r *rig) rawDaemon(name string) *rawDaemon {
	r.t.Helper()
	var m struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	r.person.MustJSON("POST", "/api/machines", map[string]string{"name": name}, 201, &m)
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.env.URL, "http")+"/ws/daemon",
		http.Header{"Authorization": {"Bearer " + m.Token}, wire.InstallHeader: {"relay-test-install-" + name}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { conn.Close() })
	return &rawDaemon{t: r.t, r: r, conn: conn, machineID: m.Machine.ID}
}

func (d *rawDaemon) send(typ int, p []byte) {
	d.t.Helper()
	if err := d.conn.WriteMessage(typ, p); err != nil {
		d.t.Fatal(err)
	}
}

func (d *rawDaemon) announce(index uint32, id string) {
	d.t.Helper()
	d.send(websocket.TextMessage, wire.Control{Type: wire.TypeSession, Index: index, Session: &wire.SessionInfo{
		ID: id, Command: []string{"sh"}, StartedAt: time.Now(), Cols: 80, Rows: 24}}.Encode())
}

func (d *rawDaemon) snapshot(index uint32, redraw []byte) {
	d.t.Helper()
	d.send(websocket.BinaryMessage, wire.AppendDaemonSnapshot(nil, wire.Snapshot{Session: index, Cols: 80, Rows: 24, Redraw: redraw}))
}

// listed waits until the server lists the machine's sessions as n, the
// last one id: the socket's frames are read in order, so everything sent
// before id's announcement has been taken.
func (d *rawDaemon) listed(n int, id string) {
	d.t.Helper()
	var got []string
	testutil.Eventually(d.t, wait, func() bool {
		var out struct{ Sessions []struct{ ID string } }
		d.r.person.MustJSON("GET", "/api/machines/"+d.machineID+"/sessions", nil, 200, &out)
		got = got[:0]
		for _, s := range out.Sessions {
			got = append(got, s.ID)
		}
		return len(got) == n && got[n-1] == id
	}, fmt.Sprintf("the machine never listed %d sessions ending with %s", n, id))
}

// nextRedraw reads the daemon's socket until the server asks for a redraw
// and returns the index it names.
func (d *rawDaemon) nextRedraw() uint32 {
	d.t.Helper()
	_ = d.conn.SetReadDeadline(time.Now().Add(wait))
	for {
		typ, p, err := d.conn.ReadMessage()
		if err != nil {
			d.t.Fatalf("waiting for a redraw request: %v", err)
		}
		if c, err := wire.DecodeFromServer(p); typ == websocket.TextMessage && err == nil && c.Type == wire.TypeRedraw {
			return c.Index
		}
	}
}

// screen is a redraw of size bytes that leaves text alone at the top left.
func screen(text string, size int) []byte {
	return append(bytes.Repeat([]byte(" "), size), "\x1b[H\x1b[2J"+text...)
}

// TestMachineCacheIsBounded: a daemon sends a snapshot whenever it likes,
// each up to wire.MaxSnapshot, and the hub cached every one: 40 sessions
// with an 8 MiB snapshot each held 319 MB of the server's heap. The
// snapshots a machine's sessions keep together are now bounded: the oldest
// caches go first, a viewer attaching to a session whose cache went asks the
// daemon for a redraw, and one whose cache stayed attaches without one.
func TestMachineCacheIsBounded(t *testing.T) {
	r := newRig(t, func(o *server.Options) { o.Relay.MachineCache = 3 << 20 })
	d := r.rawDaemon("cached")
	for i := uint32(1); i <= 4; i++ {
		d.announce(i, fmt.Sprintf("s%d", i))
		d.snapshot(i, screen(fmt.Sprintf("screen %d", i), 1<<20-100))
	}
	d.announce(5, "s5")
	d.listed(5, "s5")
	// s4's snapshot is in the cache: its viewer draws it with no redraw asked.
	v4 := r.viewer("s4", true, false)
	if err := v4.Wait(wait, func() bool {
		got, err := v4.Screen()
		return err == nil && bytes.Contains(got.Redraw, []byte("screen 4"))
	}); err != nil {
		t.Fatalf("the viewer of s4 never showed its cached screen: %v", err)
	}
	// s1's went to make room for s4's: its viewer makes the hub ask the
	// daemon, and that is the first redraw the daemon is asked for.
	first := r.viewer("s1", true, false)
	if got := d.nextRedraw(); got != 1 {
		t.Fatalf("the first redraw asked is of index %d, want 1 (s1, whose cache went)", got)
	}

	// A snapshot larger than the whole bound reaches the viewer waiting for
	// it, and is not kept: the next viewer makes the hub ask again.
	d.snapshot(1, screen("too big", 3<<20))
	if err := first.Wait(wait, func() bool {
		got, err := first.Screen()
		return err == nil && bytes.Contains(got.Redraw, []byte("too big"))
	}); err != nil {
		t.Fatalf("the viewer waiting for s1 never showed the oversized snapshot: %v", err)
	}
	r.viewer("s1", true, false)
	if got := d.nextRedraw(); got != 1 {
		t.Fatalf("after an oversized snapshot the redraw asked is of index %d, want 1", got)
	}
}

// TestMachineCacheBoundsTheHeap: the same flood at the default bound, by
// the server's heap.
func TestMachineCacheBoundsTheHeap(t *testing.T) {
	r := newRig(t, nil)
	d := r.rawDaemon("flood")
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	big := screen("x", 8<<20)
	const n = 40
	for i := uint32(1); i <= n; i++ {
		d.announce(i, fmt.Sprintf("s%d", i))
		d.snapshot(i, big)
	}
	d.announce(n+1, "last")
	d.listed(n+1, "last")
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grew := int64(ms.HeapAlloc) - int64(before)
	t.Logf("%d snapshots of %d MiB: the heap grew %d MiB", n, len(big)>>20, grew>>20)
	if limit := int64(3 * wire.MaxFromDaemon); grew > limit {
		t.Fatalf("the heap grew %d MiB for %d MiB of snapshots; the machine's cache is bounded at %d MiB", grew>>20, n*len(big)>>20, int64(2*wire.MaxFromDaemon)>>20)
	}
}

// TestMachineSessionsAreBounded: a daemon that announces sessions without
// end had every one listed and kept; a machine now lists at most
// wire.MaxSessions, a new one beyond is ignored, and one that goes makes room.
func TestMachineSessionsAreBounded(t *testing.T) {
	r := newRig(t, nil)
	d := r.rawDaemon("many")
	for i := uint32(1); i <= wire.MaxSessions+10; i++ {
		d.announce(i, fmt.Sprintf("s%04d", i))
	}
	d.send(websocket.TextMessage, wire.Control{Type: wire.TypeGone, Index: 1}.Encode())
	d.announce(wire.MaxSessions+11, "zlast")
	d.listed(wire.MaxSessions, "zlast")
}

// TestViewersPerSessionAreBounded: a session takes relay.MaxViewers viewers;
// one more is closed with CloseTooManyViewers and a reason that says so,
// and a viewer that leaves makes room.
func TestViewersPerSessionAreBounded(t *testing.T) {
	r := newRig(t, nil)
	id := r.start(80, 24, "echo")
	var viewers []*relaytest.Viewer
	for range relay.MaxViewers {
		v := r.viewer(id, true, false)
		if err := v.Wait(wait, func() bool { return v.Stats().Snapshots > 0 }); err != nil {
			t.Fatalf("a viewer within the bound: %v", err)
		}
		viewers = append(viewers, v)
	}
	extra := r.viewer(id, true, false)
	select {
	case <-extra.Done():
	case <-time.After(wait):
		t.Fatal("the viewer over the bound is still open")
	}
	var ce *websocket.CloseError
	if err := extra.Stats().Err; !errors.As(err, &ce) || ce.Code != relay.CloseTooManyViewers || !strings.Contains(ce.Text, fmt.Sprintf("%d viewers", relay.MaxViewers)) {
		t.Fatalf("the viewer over the bound ended with %v, want close %d saying so", err, relay.CloseTooManyViewers)
	}
	viewers[0].Close()
	testutil.Eventually(t, wait, func() bool {
		var out struct{ Sessions []struct{ Viewers int } }
		r.person.MustJSON("GET", "/api/machines/"+r.machineID+"/sessions", nil, 200, &out)
		return len(out.Sessions) == 1 && out.Sessions[0].Viewers == relay.MaxViewers-1
	}, "the viewer that left was still counted")
	v := r.viewer(id, true, false)
	if err := v.Wait(wait, func() bool { return v.Stats().Snapshots > 0 }); err != nil {
		t.Fatalf("a viewer after one left: %v", err)
	}
}
