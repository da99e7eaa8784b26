// Package relaytest is a viewer of the terminal relay written in Go, for
// tests and benchmarks: it speaks the viewer socket protocol exactly as the
// web page does (write each frame into a terminal, then acknowledge), feeds a
// terminal.Emulator, and checks that what it receives is a valid stream.
package relaytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/terminal"
)

// Viewer is one connected viewer. Its reader goroutine owns the emulator.
type Viewer struct {
	conn *websocket.Conn
	emu  *terminal.Emulator

	wmu sync.Mutex // one writer at a time

	mu        sync.Mutex // guards everything below
	changed   chan struct{}
	holdAcks  bool
	written   int64 // payload bytes written into the emulator
	next      int64 // offset the next output frame must have; -1 before a snapshot
	snapshots int
	outputs   int
	outBytes  int64
	bad       []string // protocol violations seen
	controls  []wire.Control
	exitCode  *int
	exitAt    int64 // next when the exit status came
	online    bool
	err       error // why the reader stopped
	cutter    *terminal.Cutter
	done      chan struct{}
}

// Dial opens a viewer socket at wsURL (ws://host/ws/viewer?ticket=…) with
// the given Origin. With holdAcks the viewer acknowledges nothing until
// Release: a slow viewer.
func Dial(wsURL, origin string, holdAcks bool) (*Viewer, *http.Response, error) {
	conn, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Origin": {origin}})
	if err != nil {
		return nil, resp, err
	}
	v := &Viewer{conn: conn, emu: terminal.NewEmulator(80, 24), changed: make(chan struct{}, 1),
		holdAcks: holdAcks, next: -1, cutter: terminal.NewCutter(), done: make(chan struct{})}
	go v.read()
	return v, resp, nil
}

// URL turns a server URL and a ticket answer's path into a socket URL.
func URL(serverURL, path string) string {
	return "ws" + strings.TrimPrefix(serverURL, "http") + path
}

func (v *Viewer) read() {
	defer close(v.done)
	for {
		typ, p, err := v.conn.ReadMessage()
		if err != nil {
			v.mu.Lock()
			v.err = err
			v.mu.Unlock()
			v.notify()
			return
		}
		if typ == websocket.TextMessage {
			v.control(p)
		} else {
			v.frame(p)
		}
		v.notify()
	}
}

func (v *Viewer) notify() {
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

func (v *Viewer) violation(format string, args ...any) {
	v.mu.Lock()
	v.bad = append(v.bad, fmt.Sprintf(format, args...))
	v.mu.Unlock()
}

func (v *Viewer) control(p []byte) {
	var c wire.Control
	if err := json.Unmarshal(p, &c); err != nil {
		v.violation("control %q: %v", p, err)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.controls = append(v.controls, c)
	switch c.Type {
	case wire.TypeExit:
		code := c.ExitCode
		v.exitCode, v.exitAt = &code, v.next
	case wire.TypeStatus:
		v.online = c.Online
	}
}

// frame writes a frame into the emulator, checks it is whole (it ends where
// the escape parser is in its ground state) and follows what came before,
// then acknowledges it.
func (v *Viewer) frame(p []byte) {
	f, err := wire.DecodeViewer(p)
	if err != nil || f.Input != nil {
		v.violation("frame %x…: %v", p[:min(len(p), 16)], err)
		return
	}
	var data []byte
	if s := f.Snapshot; s != nil {
		_ = v.emu.Resize(s.Cols, s.Rows)
		data = s.Redraw
		v.mu.Lock()
		v.snapshots++
		v.next = s.Offset
		v.mu.Unlock()
	} else {
		o := f.Output
		data = o.Data
		v.mu.Lock()
		if v.next < 0 || o.Offset != v.next {
			v.bad = append(v.bad, fmt.Sprintf("output at %d, expected %d", o.Offset, v.next))
		}
		v.next = o.Offset + int64(len(o.Data))
		v.outputs++
		v.outBytes += int64(len(o.Data))
		v.mu.Unlock()
	}
	if _, ground := v.cutter.Scan(data); len(data) > 0 && ground != len(data) {
		v.violation("frame of %d bytes ends outside the ground state (last ground point %d)", len(data), ground)
	}
	_, _ = v.emu.Write(data)
	v.mu.Lock()
	v.written += int64(len(data))
	hold, n := v.holdAcks, v.written
	v.mu.Unlock()
	if !hold {
		_ = v.Control(wire.Control{Type: wire.TypeAck, Bytes: n})
	}
}

// Release makes a slow viewer acknowledge everything and keep up.
func (v *Viewer) Release() error {
	v.mu.Lock()
	v.holdAcks = false
	n := v.written
	v.mu.Unlock()
	return v.Control(wire.Control{Type: wire.TypeAck, Bytes: n})
}

// Control sends a control message (any JSON object).
func (v *Viewer) Control(c any) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return v.send(websocket.TextMessage, b)
}

// Type sends keystrokes, exactly these bytes, as one input frame.
func (v *Viewer) Type(p []byte) error {
	return v.send(websocket.BinaryMessage, wire.AppendViewerInput(nil, p))
}

func (v *Viewer) send(typ int, p []byte) error {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	_ = v.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return v.conn.WriteMessage(typ, p)
}

// Screen is the viewer's screen as a redraw (rendered from its cells), with
// its size.
func (v *Viewer) Screen() (terminal.Snapshot, error) { return v.emu.Snapshot() }

// Stats is what the viewer has received.
type Stats struct {
	Snapshots, Outputs int
	OutputBytes        int64
	Offset             int64 // the session offset the screen reflects
	Written            int64
	ExitCode           *int
	ExitOffset         int64 // the offset the screen reflected when the exit status came
	Online             bool
	Violations         []string
	Controls           []wire.Control
	Err                error
}

// Stats returns a copy of what the viewer has seen so far.
func (v *Viewer) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return Stats{Snapshots: v.snapshots, Outputs: v.outputs, OutputBytes: v.outBytes, Written: v.written, Offset: v.next,
		ExitCode: v.exitCode, ExitOffset: v.exitAt, Online: v.online, Violations: append([]string(nil), v.bad...),
		Controls: append([]wire.Control(nil), v.controls...), Err: v.err}
}

// ErrTimeout is returned by Wait when cond never held.
var ErrTimeout = errors.New("relaytest: timed out")

// Wait calls cond after each frame until it returns true, the socket ends
// (cond is then tried once more) or timeout passes.
func (v *Viewer) Wait(timeout time.Duration, cond func() bool) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-v.changed:
		case <-v.done:
			if cond() {
				return nil
			}
			return fmt.Errorf("viewer socket ended: %v", v.Stats().Err)
		case <-t.C:
			return ErrTimeout
		}
	}
}

// Done is closed when the socket has ended.
func (v *Viewer) Done() <-chan struct{} { return v.done }

// Close ends the socket and the emulator.
func (v *Viewer) Close() {
	_ = v.conn.Close()
	<-v.done
	_ = v.emu.Close()
}
