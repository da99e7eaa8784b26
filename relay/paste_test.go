package relay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/relaytest"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// pasteSession starts a real program in a real PTY that reads exactly
// wire.MaxInput bytes of raw input (no line discipline: a canonical line
// holds 4 KiB) and prints their SHA-256, and waits until it reads. It
// returns the session and an interactive viewer of it.
func pasteSession(r *rig) (string, *relaytest.Viewer) {
	r.t.Helper()
	return rawSession(r, fmt.Sprintf("head -c %d | sha256sum", wire.MaxInput))
}

// rawSession runs the shell command cmd in a real PTY in raw mode, without
// echo, and returns once it runs, with an interactive viewer of it.
func rawSession(r *rig, cmd string) (string, *relaytest.Viewer) {
	r.t.Helper()
	id, err := r.d.Start(daemon.Spec{Argv: []string{"sh", "-c", "stty raw -echo && printf 'READ''Y\\r\\n' && " + cmd}, Cols: 100, Rows: 10,
		Env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LC_ALL=C"}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.awaitListed(id)
	r.waitDaemon(id, "READY")
	return id, r.viewer(id, false, false)
}

// paste is n bytes of text as a person pastes it: lines of words, some of
// them not ASCII, ending a line with CR as xterm.js sends a paste's
// newlines.
func paste(n int) []byte {
	line := []byte("pasted words, déjà vu, 日本語 and a tab\there\r")
	return bytes.Repeat(line, n/len(line)+1)[:n]
}

// arrives waits until the daemon's screen shows text, failing at once if
// the daemon's link goes down meanwhile.
func arrives(r *rig, id, text string) {
	r.t.Helper()
	testutil.Eventually(r.t, wait, func() bool {
		noLinkDrop(r)
		return bytes.Contains(r.daemonScreen(id), []byte(text))
	}, "the program never printed the paste's hash")
}

// noLinkDrop fails if the daemon's link went down since the rig started.
func noLinkDrop(r *rig) {
	r.t.Helper()
	for len(r.links) > 0 {
		if !<-r.links {
			r.t.Fatal("the daemon's link went down: the machine went offline")
		}
	}
}

// TestLargestPasteArrivesWhole: a paste of exactly wire.MaxInput bytes,
// sent by a viewer as one input frame, reaches the program byte for byte
// through the server and the daemon's link (each hop's limit fits it once
// wrapped in its frame), and the machine stays online. Before the limits
// were one, the server forwarded it in a daemon frame 4 bytes over the
// daemon's read limit and the daemon's link closed.
func TestLargestPasteArrivesWhole(t *testing.T) {
	r := newRig(t, nil)
	id, v := pasteSession(r)
	p := paste(wire.MaxInput)
	if err := v.Type(p); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p)
	arrives(r, id, hex.EncodeToString(sum[:]))
	for _, c := range v.Stats().Controls {
		if c.Type == wire.TypeRefused {
			t.Fatalf("the largest paste was refused: %s", c.Reason)
		}
	}
}

// TestPasteOverTheLimitIsRefused: one byte over wire.MaxInput is refused
// by the server with a message the viewer can show; the viewer's socket
// and the daemon's link stay up, nothing of it reaches the program, and
// a paste within the limit after it arrives whole.
func TestPasteOverTheLimitIsRefused(t *testing.T) {
	r := newRig(t, nil)
	id, v := pasteSession(r)
	if err := v.Type(paste(wire.MaxInput + 1)); err != nil {
		t.Fatal(err)
	}
	var refused wire.Control
	err := v.Wait(wait, func() bool {
		for _, c := range v.Stats().Controls {
			if c.Type == wire.TypeRefused {
				refused = c
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no refusal came: %v", err)
	}
	if refused.Bytes != wire.MaxInput+1 || !strings.Contains(refused.Reason, fmt.Sprint(wire.MaxInput)) {
		t.Fatalf("refusal %+v does not say how large the input was and what the limit is", refused)
	}
	p := paste(wire.MaxInput)
	p[0] = '!' // not the refused paste's first byte, had any of it arrived
	if err := v.Type(p); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p)
	arrives(r, id, hex.EncodeToString(sum[:]))
	if err := v.Stats().Err; err != nil {
		t.Fatalf("the viewer's socket closed: %v", err)
	}
}

// TestInputTheProgramDoesNotReadIsRefusedAloud: a program that reads none
// of its input fills what the daemon holds for it (a paste of
// wire.MaxInput), and the next paste cannot be delivered: the person who
// typed it is told, with how much was lost and why, instead of the daemon
// dropping it with a line in its own log. The sockets stay up and the
// program keeps running.
func TestInputTheProgramDoesNotReadIsRefusedAloud(t *testing.T) {
	r := newRig(t, nil)
	_, v := rawSession(r, "exec sleep 600")
	refusals := func() (out []wire.Control) {
		for _, c := range v.Stats().Controls {
			if c.Type == wire.TypeRefused {
				out = append(out, c)
			}
		}
		return out
	}
	if err := v.Type(paste(wire.MaxInput)); err != nil {
		t.Fatal(err)
	}
	if err := v.Type(paste(wire.MaxInput)); err != nil {
		t.Fatal(err)
	}
	if err := v.Wait(wait, func() bool { return len(refusals()) > 0 }); err != nil {
		t.Fatalf("the person was not told that the second paste was not delivered: %v", err)
	}
	var lost int64
	for _, c := range refusals() {
		if !strings.Contains(c.Reason, "not reading") || !strings.Contains(c.Reason, fmt.Sprint(c.Bytes)) {
			t.Fatalf("refusal %+v does not say how much was lost and why", c)
		}
		lost += c.Bytes
	}
	if lost != wire.MaxInput {
		t.Fatalf("refusals count %d bytes lost, want the second paste's %d", lost, wire.MaxInput)
	}
	noLinkDrop(r)
	if err := v.Stats().Err; err != nil {
		t.Fatalf("the viewer's socket closed: %v", err)
	}
}
