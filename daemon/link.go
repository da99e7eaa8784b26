package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fasthttp/websocket"
	"golang.org/x/net/http/httpguts"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// Serve keeps the daemon linked to the server until ctx ends, reconnecting
// with backoff; sessions run on whether or not it is linked. It returns
// ErrRefused when the server refuses the token, ErrOtherInstall when the
// machine belongs to another install, else ctx's error.
func (d *Daemon) Serve(ctx context.Context) error {
	wait := d.opts.MinBackoff
	for {
		up, err := d.connect(ctx)
		if errors.Is(err, ErrRefused) || errors.Is(err, ErrOtherInstall) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Only a link that stayed up longer than the longest wait starts
		// the backoff over. One that opens and fails at once (the server
		// closes it over something the daemon sends) backs off like a
		// failed dial, instead of being redialled every MinBackoff forever.
		if up > d.opts.MaxBackoff {
			wait = d.opts.MinBackoff
		}
		d.opts.Logger.Info("server link down; reconnecting", "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, d.opts.MaxBackoff)
	}
}

// connect dials once and runs the link until it fails; up is how long the
// link stayed up (zero when the socket did not open).
func (d *Daemon) connect(ctx context.Context) (up time.Duration, err error) {
	hdr := http.Header{"Authorization": {"Bearer " + d.opts.Token}, wire.InstallHeader: {d.opts.InstallID}}
	// A client masks what it sends, so each message is copied through the
	// write buffer, and every time it fills a frame goes out in a write of
	// its own: sized to a whole output frame, an output frame costs one
	// write (the 4 KiB default cost 16 per 64 KiB frame).
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: d.opts.Dial,
		WriteBufferSize: linkWriteBuffer}
	conn, resp, err := dialer.DialContext(ctx, d.wsURL, hdr)
	if resp != nil && resp.StatusCode == http.StatusUnauthorized {
		return 0, ErrRefused
	}
	if resp != nil && resp.StatusCode == http.StatusConflict {
		return 0, ErrOtherInstall
	}
	if err != nil && resp != nil {
		hint := ""
		if resp.StatusCode == http.StatusNotFound {
			hint = " (is --server the Tabbridge server's public URL?)"
		}
		return 0, fmt.Errorf("dial %s: the server answered %s%s: %w", d.wsURL, resp.Status, hint, err)
	}
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", d.wsURL, err)
	}
	d.opts.Logger.Info("linked to server", "url", d.wsURL)
	start := time.Now()
	d.run(ctx, conn, httpguts.HeaderValuesContainsToken(resp.Header.Values(wire.FeaturesHeader), wire.FeatureRefused))
	return time.Since(start), errors.New("the link closed")
}

// run serves one socket: a reader for the server's frames and this
// goroutine as the only writer. tellRefused says whether the server takes
// "refused"; an older one does not, and its person is not told (the
// daemon's log still is).
func (d *Daemon) run(ctx context.Context, conn *websocket.Conn, tellRefused bool) {
	d.tellRefused.Store(tellRefused)
	d.setLinked(true)
	if d.opts.Connected != nil {
		d.opts.Connected(true)
	}
	ctx, cancel := context.WithCancel(ctx)
	readerDone := make(chan struct{})
	d.wg.Add(1) // Close waits for the reader
	go func() {
		defer d.wg.Done()
		defer close(readerDone)
		defer cancel()
		d.read(conn)
	}()
	_ = d.write(ctx, conn)
	cancel()
	_ = conn.Close()
	// The closed socket ends the reader. Nothing it calls should block (a
	// session's input never does), but should it ever be stuck, the daemon
	// links again without it rather than stay offline for good.
	t := time.NewTimer(d.opts.WriteWait)
	select {
	case <-readerDone:
	case <-t.C:
		d.opts.Logger.Error("the server link's reader is stuck; linking again without it")
	}
	t.Stop()
	d.setLinked(false)
	if d.opts.Connected != nil {
		d.opts.Connected(false)
	}
}

// write announces every session, says "synced", then sends each session's
// frames as they come, pinging while idle.
func (d *Daemon) write(ctx context.Context, conn *websocket.Conn) error {
	send := func(f wire.Frame) error {
		_ = conn.SetWriteDeadline(time.Now().Add(d.opts.WriteWait))
		typ := websocket.BinaryMessage
		if f.Text {
			typ = websocket.TextMessage
		}
		return conn.WriteMessage(typ, f.Data)
	}
	tick := time.NewTicker(d.opts.Ping)
	defer tick.Stop()
	synced := false
	for {
		for _, e := range d.list() {
			for _, f := range e.takeFrames() {
				if err := send(f.Frame); err != nil {
					return err
				}
				if f.pooled {
					putFrame(f.Data)
				}
			}
		}
		d.prune()
		for _, index := range d.takeGone() {
			if err := send(wire.Control{Type: wire.TypeGone, Index: index}.Frame()); err != nil {
				return err
			}
		}
		if !synced {
			if err := send(wire.Control{Type: wire.TypeSynced}.Frame()); err != nil {
				return err
			}
			synced = true
		}
		select { // StopSessions waits for a pass that sent everything
		case d.passed <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.wake:
		case <-tick.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(d.opts.WriteWait)); err != nil {
				return err
			}
		}
	}
}

// read handles the server's frames: keystrokes (written to the PTY exactly
// as sent), resizes and redraw requests. Anything malformed ends the link.
func (d *Daemon) read(conn *websocket.Conn) {
	conn.SetReadLimit(wire.MaxToDaemon) // the server's largest message: an input frame of wire.MaxInput
	extend := func() { _ = conn.SetReadDeadline(time.Now().Add(3 * d.opts.Ping)) }
	conn.SetPongHandler(func(string) error { extend(); return nil })
	extend()
	for {
		typ, p, err := conn.ReadMessage()
		if err != nil {
			return
		}
		extend()
		if typ == websocket.TextMessage {
			err = d.control(p)
		} else {
			err = d.frame(p)
		}
		if err != nil {
			d.opts.Logger.Warn("server sent a bad message; reconnecting", "err", err)
			return
		}
	}
}

func (d *Daemon) frame(p []byte) error {
	f, err := wire.DecodeDaemon(p)
	if err != nil {
		return err
	}
	if f.Input == nil {
		return errors.New("daemon: the server may send only input frames")
	}
	if e := d.entry(f.Input.Session); e != nil {
		e.input(f.Input.Data)
	}
	return nil
}

func (d *Daemon) control(p []byte) error {
	c, err := wire.DecodeFromServer(p)
	if err != nil {
		return err
	}
	e := d.entry(c.Index)
	if e == nil {
		return nil
	}
	switch c.Type {
	case wire.TypeResize:
		e.resize(c.Cols, c.Rows)
	case wire.TypeRedraw:
		e.askRedraw()
	}
	return nil
}
