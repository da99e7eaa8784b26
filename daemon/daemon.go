// Package daemon owns the machine side of live terminals: the sessions a
// daemon runs (each a terminal.Session in a PTY with its emulator), and the
// one WebSocket it dials out to the server, reconnecting with backoff while
// the sessions keep running and their screens keep updating.
//
// The link never blocks a session: output waits in a bounded queue per
// session, and when the server cannot keep up the queue is discarded whole
// and a snapshot (a redraw) is sent in its place, as on every reconnect.
// It knows nothing of the server's storage or of viewers.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tabbridge/tabbridge/relay/wire"
	"github.com/tabbridge/tabbridge/terminal"
)

// Defaults for Options.
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
	DefaultQueue      = 1 << 20
	DefaultPing       = 20 * time.Second
	DefaultWriteWait  = 10 * time.Second
	// maxOutputFrame bounds the batches merged into one frame: the server
	// sees a frame as one unit it cannot cut, and a viewer's window can be
	// overshot by one unit.
	maxOutputFrame = 64 << 10
	// linkWriteBuffer holds an output frame and its header whole.
	linkWriteBuffer = maxOutputFrame + 64
)

// ErrOtherInstall is returned by Serve when the server holds the machine
// for another install of the daemon: retrying cannot help; this computer
// needs a machine (and token) of its own.
var ErrOtherInstall = errors.New("daemon: the machine token belongs to another install")

// ErrRefused is returned by Serve when the server refuses the machine token
// (unknown or revoked): retrying cannot help; a person must create a new one.
var ErrRefused = errors.New("daemon: the server refused the machine token")

// Options configure a Daemon; New fills zero values.
type Options struct {
	// Server is the server's public URL (http:// or https://).
	Server string
	// Token is the machine token (tbm_…) a person created in the web app.
	Token string
	// InstallID identifies this install to the server (Credentials.Install):
	// the machine belongs to the first install that links with its token.
	// Empty means a random one for this Daemon alone (tests; a daemon that
	// must survive restarts passes the enrolled one).
	InstallID string
	// MinBackoff and MaxBackoff bound the wait between reconnects, which
	// doubles from the first to the second.
	MinBackoff, MaxBackoff time.Duration
	// Queue bounds the output bytes waiting for the server per session;
	// past it they are discarded and replaced by a snapshot.
	Queue int64
	// Ping is the heartbeat interval; WriteWait each write's deadline.
	Ping, WriteWait time.Duration
	Logger          *slog.Logger
	// Connected, if set, is told each time the link is up (true) or down.
	Connected func(bool)
	// KeepExited is how many exited sessions the daemon keeps listed (so a
	// person can still read their last screen); older ones are forgotten
	// and the server told they are gone. Default DefaultKeepExited.
	KeepExited int
	// Dial, if set, opens the connection to the server's address in place
	// of the network (tests: an in-memory pipe, so the backoff runs on a
	// synctest bubble's clock).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultKeepExited bounds the exited sessions a long-running daemon keeps.
const DefaultKeepExited = 32

// Spec describes a session to start.
type Spec struct {
	Argv       []string // program and arguments
	Dir        string
	Env        []string // nil means the daemon's environment
	Cols, Rows int      // default 80×24
}

// Daemon runs sessions and keeps them linked to the server.
type Daemon struct {
	opts  Options // static after New
	wsURL string  // static

	mu      sync.Mutex
	entries map[uint32]*entry
	nextIdx uint32
	closed  bool
	linked  bool          // a link is up: new sessions are announced at once
	gone    []uint32      // forgotten sessions the link has still to report
	wake    chan struct{} // capacity 1: the link writer has work
	passed  chan struct{} // capacity 1: the link writer sent all it had
	wg      sync.WaitGroup
	// tellRefused: the server of the link up (or last up) takes "refused"
	// (wire.FeatureRefused); set before the link's sessions go online.
	tellRefused atomic.Bool
}

// New checks the options and returns a Daemon with no sessions.
func New(o Options) (*Daemon, error) {
	ws, err := wsURL(o.Server)
	if err != nil {
		return nil, fmt.Errorf("new daemon: %w", err)
	}
	if !strings.HasPrefix(o.Token, tokenPrefix) {
		return nil, fmt.Errorf("new daemon: the machine token must start with %s; create one in the web app", tokenPrefix)
	}
	if o.InstallID == "" {
		o.InstallID = NewInstallID()
	}
	if !wire.ValidInstallID(o.InstallID) {
		return nil, fmt.Errorf("new daemon: the install id must be %d to %d printable characters (enroll writes one)", wire.MinInstallID, wire.MaxInstallID)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Ping <= 0 {
		o.Ping = DefaultPing
	}
	if o.WriteWait <= 0 {
		o.WriteWait = DefaultWriteWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.KeepExited <= 0 {
		o.KeepExited = DefaultKeepExited
	}
	// The server lists at most wire.MaxSessions of a machine's sessions.
	o.KeepExited = min(o.KeepExited, wire.MaxKeptExited)
	return &Daemon{opts: o, wsURL: ws, entries: map[uint32]*entry{},
		wake: make(chan struct{}, 1), passed: make(chan struct{}, 1)}, nil
}

// wsURL is the daemon socket's URL on the server at public (http or https).
func wsURL(public string) (string, error) {
	u, err := url.Parse(strings.TrimRight(public, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("server %q must be an http or https URL", public)
	}
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path += "/ws/daemon"
	return u.String(), nil
}

func (d *Daemon) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Start runs a program in a new session and returns its id.
func (d *Daemon) Start(spec Spec) (string, error) {
	if len(spec.Argv) == 0 {
		return "", errors.New("start session: no command")
	}
	if spec.Cols <= 0 || spec.Rows <= 0 {
		spec.Cols, spec.Rows = 80, 24
	}
	if err := checkSpec(spec); err != nil {
		return "", fmt.Errorf("start session: %w", err)
	}
	path, err := lookPath(spec.Argv[0], spec.Env)
	if err != nil {
		return "", fmt.Errorf("start session: %w", err)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return "", errors.New("start session: daemon closed")
	}
	if n := d.runningLocked(); n >= wire.MaxRunning {
		d.mu.Unlock()
		return "", fmt.Errorf("start session: this machine already runs %d sessions, the most one daemon runs at once; end some of them first", n)
	}
	d.nextIdx++
	e := newEntry(d, d.nextIdx, spec)
	d.entries[e.index] = e
	if d.linked {
		e.link(true)
	}
	d.mu.Unlock()
	sess, err := terminal.Start(terminal.Options{
		Path: path, Args: spec.Argv[1:], Dir: spec.Dir, Env: spec.Env,
		Cols: spec.Cols, Rows: spec.Rows, Output: e.output,
		// room for the largest input frame, or such a paste could never
		// arrive whole
		InputQueue: max(terminal.DefaultInputQueue, wire.MaxInput),
	})
	if err != nil {
		d.mu.Lock()
		delete(d.entries, e.index)
		d.mu.Unlock()
		return "", err
	}
	e.started(sess)
	d.wg.Add(1)
	go func() { defer d.wg.Done(); e.await() }()
	d.signal()
	return e.info.ID, nil
}

// lookPath finds the program a session runs the way the shell that asked
// for it would: a name with no slash is looked up in the PATH of the
// session's environment (the caller's, for 'tabbridge run'), not in the
// daemon's own. Relative PATH entries are skipped, as os/exec refuses them.
// With no environment, or none with a PATH, the daemon's PATH is used.
func lookPath(name string, env []string) (string, error) {
	if strings.ContainsAny(name, pathSeparators) {
		return name, nil
	}
	path, found := "", false
	for _, kv := range env { // the last PATH wins, as in os/exec
		if k, v, ok := strings.Cut(kv, "="); ok && sameEnvKey(k, "PATH") {
			path, found = v, true
		}
	}
	if !found {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p, ok := executableIn(dir, name, env); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q is not found in the PATH it was run with (%s); give its full path", name, path)
}

// checkSpec refuses a session the server could not list: its announcement
// must keep within the wire's limits, or the server ignores it and no one
// could see or type into the session.
func checkSpec(spec Spec) error {
	if len(spec.Argv) > wire.MaxArgs {
		return fmt.Errorf("the command has %d words, more than the %d a session may have; run a script that holds them instead", len(spec.Argv), wire.MaxArgs)
	}
	n := len(spec.Dir)
	for _, a := range spec.Argv {
		n += len(a)
	}
	if n > wire.MaxArgBytes {
		return fmt.Errorf("the command and directory take %d bytes, more than the %d a session may have; run a script that holds them instead", n, wire.MaxArgBytes)
	}
	if spec.Cols > wire.MaxCols || spec.Rows > wire.MaxRows {
		return fmt.Errorf("size %dx%d is larger than %dx%d", spec.Cols, spec.Rows, wire.MaxCols, wire.MaxRows)
	}
	// JSON escapes control characters six bytes apiece.
	info := wire.SessionInfo{ID: newID(), Command: spec.Argv, Dir: spec.Dir, StartedAt: time.Now(), Cols: spec.Cols, Rows: spec.Rows}
	if m := len(wire.Control{Type: wire.TypeSession, Index: ^uint32(0), Session: &info}.Encode()); m > wire.MaxControl {
		return fmt.Errorf("the command and directory take %d bytes as JSON, more than the %d a session's announcement may have; run a script that holds them instead", m, wire.MaxControl)
	}
	return nil
}

// Session returns a running or exited session by id, for tests and the
// local control socket.
func (d *Daemon) Session(id string) (*terminal.Session, bool) {
	for _, e := range d.list() {
		if e.info.ID == id {
			return e.session(), true
		}
	}
	return nil, false
}

// Info returns what the daemon tells the server about a session: its exit
// is recorded a moment after the session's Done, once every byte of output
// has been queued before it.
func (d *Daemon) Info(id string) (wire.SessionInfo, bool) {
	for _, e := range d.list() {
		if e.info.ID == id {
			e.mu.Lock()
			defer e.mu.Unlock()
			return e.info, true
		}
	}
	return wire.SessionInfo{}, false
}

// list returns the entries by index.
func (d *Daemon) list() []*entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*entry, 0, len(d.entries))
	for _, e := range d.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out
}

// runningLocked counts the sessions whose program has not exited. d.mu is
// held.
func (d *Daemon) runningLocked() int {
	n := 0
	for _, e := range d.entries {
		if !e.exited() {
			n++
		}
	}
	return n
}

// prune forgets the oldest exited sessions beyond KeepExited — only those
// whose exit the server has heard (or that no link has announced) — queues
// a gone report for the link, and releases what is left of them (their
// emulators).
func (d *Daemon) prune() {
	for _, e := range d.forget() {
		// The program has exited, so Stop only waits for the session's
		// goroutines to end; the context bounds it all the same.
		ctx, cancel := context.WithTimeout(context.Background(), d.opts.WriteWait)
		if err := e.session().Stop(ctx); err != nil {
			d.opts.Logger.Warn("release a forgotten session", "session", e.info.ID, "err", err)
		}
		cancel()
	}
}

// forget removes the exited sessions prune forgets and returns them.
func (d *Daemon) forget() []*entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	var done []*entry
	for _, e := range d.entries {
		if e.finished() {
			done = append(done, e)
		}
	}
	if len(done) <= d.opts.KeepExited {
		return nil
	}
	sort.Slice(done, func(i, j int) bool { return done[i].index < done[j].index })
	old := done[:len(done)-d.opts.KeepExited]
	for _, e := range old {
		delete(d.entries, e.index)
		if d.linked {
			d.gone = append(d.gone, e.index)
		}
	}
	return old
}

// takeGone returns the gone reports waiting for the link.
func (d *Daemon) takeGone() []uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.gone
	d.gone = nil
	return g
}

// setLinked marks every session online or offline with the link, under
// d.mu so that a session started meanwhile is not missed.
func (d *Daemon) setLinked(up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.linked = up
	select { // a flush waiting on this link's writer stops waiting
	case d.passed <- struct{}{}:
	default:
	}
	d.gone = nil // a new link announces only the sessions still held
	for _, e := range d.entries {
		e.link(up)
	}
}

func (d *Daemon) entry(index uint32) *entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.entries[index]
}

// StopSessions refuses new sessions, stops every running one (killing its
// process group) and, while the link is up, waits until the server has been
// sent their exits, so that it does not go on listing them as running once
// the daemon is gone. ctx bounds it all; Serve should then be stopped, and
// Close called.
func (d *Daemon) StopSessions(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	entries := d.list()
	running := 0
	for _, e := range entries {
		if s := e.session(); s != nil && !e.exited() {
			running++
		}
	}
	d.opts.Logger.Info(fmt.Sprintf("stopping %d sessions", running))
	var errs []error
	for _, e := range entries {
		if s := e.session(); s != nil {
			if err := s.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, e := range entries {
		select {
		case <-e.done: // the exit is recorded, and queued if linked
		case <-ctx.Done():
			return errors.Join(append(errs, fmt.Errorf("stop sessions: %w", ctx.Err()))...)
		}
	}
	if err := d.flush(ctx, entries); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// flush waits until the link writer has sent the exits of entries: none is
// pending after a pass of the writer that began once they were recorded.
// Without a link there is nothing to wait for.
func (d *Daemon) flush(ctx context.Context, entries []*entry) error {
	for {
		d.mu.Lock()
		linked := d.linked
		d.mu.Unlock()
		if !linked {
			return nil
		}
		// A pass that ends after this drain ended after any pass that took
		// an exit before it, so such an exit is written.
		select {
		case <-d.passed:
		default:
		}
		d.signal()
		select {
		case <-d.passed:
		case <-ctx.Done():
			return fmt.Errorf("send the sessions' exits to the server: %w", ctx.Err())
		}
		sent := true
		for _, e := range entries {
			if !e.finished() {
				sent = false
			}
		}
		if sent {
			return nil
		}
	}
}

// Close stops every session (killing its process group) and waits for the
// daemon's goroutines. Serve must have returned, or ctx ended.
func (d *Daemon) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	var errs []error
	for _, e := range d.list() {
		if s := e.session(); s != nil {
			if err := s.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	d.wg.Wait()
	return errors.Join(errs...)
}

// tokenPrefix starts every machine token (store.MachineTokenPrefix).
const tokenPrefix = "tbm_"

// newID is a session id: time-ordered, unique across the machine.
func newID() string { return uuid.Must(uuid.NewV7()).String() }
