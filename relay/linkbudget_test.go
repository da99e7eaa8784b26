package relay_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// stallGate holds the daemon's reads of its link while closed, as a
// network that stops delivering would: the server's writes to the daemon
// fill the kernel's buffers and then wait.
type stallGate struct{ mu sync.RWMutex }

func (g *stallGate) stall()   { g.mu.Lock() }
func (g *stallGate) release() { g.mu.Unlock() }

type stallConn struct {
	net.Conn
	g *stallGate
}

func (c stallConn) Read(p []byte) (int, error) {
	c.g.mu.RLock()
	c.g.mu.RUnlock() //nolint:staticcheck // an empty section: wait while stalled
	return c.Conn.Read(p)
}

// TestInputPastALinkThatCannotKeepUpIsRefusedAloud: while the daemon's
// link delivers nothing (its reads stalled), the server holds at most a
// bounded amount of a person's input for it, not 1024 frames of a MiB each:
// input past that is refused with a refusal that says so, the link is not
// closed, and once the link delivers again, input reaches the program.
func TestInputPastALinkThatCannotKeepUpIsRefusedAloud(t *testing.T) {
	gate := &stallGate{}
	daemonDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// A small window, so the kernel takes little of what waits.
		_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
		return stallConn{Conn: conn, g: gate}, nil
	}
	defer func() { daemonDial = nil }()
	r := newRig(t, nil)
	// The program reads all its input, so while the link is stalled (and
	// nothing reaches the daemon) every refusal is the server's. It prints
	// a line for each line of input that holds MARK.
	_, v := rawSession(r, "exec grep --line-buffered -o MARK")
	refusal := func() (wire.Control, bool) {
		for _, c := range v.Stats().Controls {
			if c.Type == wire.TypeRefused {
				return c, true
			}
		}
		return wire.Control{}, false
	}

	gate.stall()
	released := false
	defer func() {
		if !released {
			gate.release()
		}
	}()
	// 48 MiB, a MiB at a time, until the server refuses some: without a
	// byte bound it would hold all 48 frames. The server's writer waits on
	// the stalled socket for WriteWait (10 s) before it gives the link up,
	// far longer than this takes.
	var got wire.Control
	for i := 0; i < 48; i++ {
		if err := v.Type(paste(wire.MaxInput)); err != nil {
			t.Fatal(err)
		}
		if c, ok := refusal(); ok {
			got = c
			break
		}
	}
	if got.Type == "" {
		if err := v.Wait(wait, func() bool { _, ok := refusal(); return ok }); err != nil {
			t.Fatalf("48 MiB of input waited for a link that delivered none of it, and none was refused: %v", err)
		}
		got, _ = refusal()
	}
	if got.Bytes != wire.MaxInput || !strings.Contains(got.Reason, "connection to the machine is not keeping up") {
		t.Fatalf("refusal %+v does not say how much was lost and that the machine's connection is behind", got)
	}
	gate.release()
	released = true

	// The link was never closed for it, and input typed now reaches the
	// program. What waited floods the daemon at once and it may refuse
	// some itself while the program catches up (aloud, as the person would
	// see), so MARK is typed again after each refusal that follows it.
	noRefusals := func() int {
		n := 0
		for _, c := range v.Stats().Controls {
			if c.Type == wire.TypeRefused {
				n++
			}
		}
		return n
	}
	marked := func() bool {
		snap, err := v.Screen()
		return err == nil && bytes.Contains(snap.Screen(), []byte("MARK"))
	}
	deadline := time.Now().Add(wait)
	for !marked() {
		seen := noRefusals()
		if err := v.Type([]byte("\nMARK\n")); err != nil {
			t.Fatal(err)
		}
		if err := v.Wait(time.Until(deadline), func() bool { return marked() || noRefusals() > seen }); err != nil {
			t.Fatalf("input typed after the link caught up never reached the program: %v", err)
		}
	}
	noLinkDrop(r)
	if err := v.Stats().Err; err != nil {
		t.Fatalf("the viewer's socket closed: %v", err)
	}
}
