package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Control message types. See docs/PROTOCOL-terminals.md for who sends which.
const (
	// Daemon → server.
	TypeSession = "session" // a session exists (sent on connect and on start)
	TypeExit    = "exit"    // a session's program ended (also server → viewer)
	TypeGone    = "gone"    // a session was removed from the daemon
	TypeSynced  = "synced"  // every live session has been announced
	// Server → daemon.
	TypeResize = "resize" // set a session's size (also viewer → server)
	TypeRedraw = "redraw" // send a snapshot of a session soon
	// Viewer → server.
	TypeAck = "ack" // bytes written into the viewer's terminal so far
	// Server → viewer.
	TypeStatus  = "status"  // the session's machine is (not) connected
	TypeRefused = "refused" // an input frame was refused, with the reason (also daemon → server, without one)
)

// ErrControl is returned for a control message that is not valid JSON, has
// an unknown type, or lacks or breaks a field its type needs.
var ErrControl = errors.New("wire: malformed control message")

// ErrSession is returned, with ErrControl, for a "session" message whose
// session breaks a limit: the server ignores that one session and keeps
// the daemon's link, since the rest of what the daemon says is sound.
var ErrSession = errors.New("wire: session outside the limits")

// MaxControl bounds a control message's size.
const MaxControl = 64 << 10

// Limits on what a daemon may say about a session.
const (
	MaxArgs     = 256
	MaxArgBytes = 16 << 10
	MaxIDLen    = 64
	// MaxSessions bounds the sessions one machine has listed at once, running
	// and exited: the server ignores a new session beyond it (and logs it),
	// and the daemon refuses to start one (MaxRunning).
	MaxSessions = 256
	// MaxRunning bounds the sessions a daemon runs at once, leaving room
	// under MaxSessions for the exited ones it keeps (at most MaxKeptExited).
	MaxRunning    = 200
	MaxKeptExited = MaxSessions - MaxRunning
)

// SessionInfo describes one session on a daemon. ID is chosen by the
// daemon and is unique among the machine's sessions; the server never lets
// a daemon speak for another machine's sessions.
type SessionInfo struct {
	ID        string    `json:"id"`
	Command   []string  `json:"command"`
	Dir       string    `json:"dir"`
	StartedAt time.Time `json:"startedAt"`
	Cols      int       `json:"cols"`
	Rows      int       `json:"rows"`
	Exited    bool      `json:"exited"`
	ExitCode  int       `json:"exitCode"`
}

// Control is every control message, one struct for all types; which fields
// matter depends on Type. Unknown fields are ignored, which is how a
// viewer's "sessionId" (or any other) has no effect.
type Control struct {
	Type string `json:"type"`
	// Index is the daemon's index of a session (daemon socket only).
	Index uint32 `json:"index,omitempty"`
	// Session describes a session (TypeSession).
	Session *SessionInfo `json:"session,omitempty"`
	// ExitCode is a program's exit status, -1 when a signal ended it.
	ExitCode int `json:"exitCode,omitempty"`
	// Cols and Rows are a size (TypeResize).
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Bytes is the count of frame payload bytes acknowledged (TypeAck).
	Bytes int64 `json:"bytes,omitempty"`
	// Online says whether the session's daemon is connected (TypeStatus).
	Online bool `json:"online,omitempty"`
	// WatchOnly tells a viewer it cannot type (TypeSession to a viewer).
	WatchOnly bool `json:"watchOnly,omitempty"`
	// Reason says, for a person, why input was refused (TypeRefused,
	// whose Bytes is the refused input's length).
	Reason string `json:"reason,omitempty"`
}

// Encode marshals a control message. A control message travels as a text frame, to a viewer's
// browser among others, and a browser fails the socket on text that is not UTF-8; so Encode
// holds that invariant: encoding/json writes U+FFFD for bad bytes in the strings a daemon sent
// (a command, a directory), and the check below keeps it so if a field ever carries raw JSON.
func (c Control) Encode() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic("wire: encode control: " + err.Error()) // plain fields always marshal
	}
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return b
}

// DecodeFromDaemon decodes a control message a daemon sent.
func DecodeFromDaemon(p []byte) (Control, error) {
	c, err := decode(p)
	if err != nil {
		return c, err
	}
	switch c.Type {
	case TypeSession:
		return c, checkSession(c.Session)
	case TypeExit, TypeGone, TypeSynced:
		return c, nil
	case TypeRefused:
		// the program is not reading its input: Bytes of it were not
		// delivered. The server words the reason; a daemon's is dropped.
		if c.Bytes <= 0 {
			return c, fmt.Errorf("%w: a refusal of %d bytes", ErrControl, c.Bytes)
		}
		c.Reason = ""
		return c, nil
	}
	return c, fmt.Errorf("%w: type %q from a daemon", ErrControl, c.Type)
}

// DecodeFromServer decodes a control message the server sent a daemon.
func DecodeFromServer(p []byte) (Control, error) {
	c, err := decode(p)
	if err != nil {
		return c, err
	}
	switch c.Type {
	case TypeResize:
		if err := checkSize(c.Cols, c.Rows); err != nil {
			return c, fmt.Errorf("%w: %v", ErrControl, err)
		}
		return c, nil
	case TypeRedraw:
		return c, nil
	}
	return c, fmt.Errorf("%w: type %q from the server", ErrControl, c.Type)
}

// fromViewer is all a viewer may say: every other field, a "session" or
// "sessionId" above all, is ignored whatever its type.
type fromViewer struct {
	Type  string `json:"type"`
	Bytes int64  `json:"bytes"`
	Cols  int    `json:"cols"`
	Rows  int    `json:"rows"`
}

// DecodeFromViewer decodes a control message a viewer sent.
func DecodeFromViewer(p []byte) (Control, error) {
	var v fromViewer
	if len(p) > MaxControl {
		return Control{}, fmt.Errorf("%w: %d bytes", ErrControl, len(p))
	}
	if err := json.Unmarshal(p, &v); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrControl, err)
	}
	c := Control{Type: v.Type, Bytes: v.Bytes, Cols: v.Cols, Rows: v.Rows}
	switch c.Type {
	case TypeAck:
		if c.Bytes < 0 {
			return c, fmt.Errorf("%w: negative ack", ErrControl)
		}
		return c, nil
	case TypeResize:
		if err := checkSize(c.Cols, c.Rows); err != nil {
			return c, fmt.Errorf("%w: %v", ErrControl, err)
		}
		return c, nil
	}
	return c, fmt.Errorf("%w: type %q from a viewer", ErrControl, c.Type)
}

func decode(p []byte) (Control, error) {
	var c Control
	if len(p) > MaxControl {
		return c, fmt.Errorf("%w: %d bytes", ErrControl, len(p))
	}
	if err := json.Unmarshal(p, &c); err != nil {
		return Control{}, fmt.Errorf("%w: %v", ErrControl, err)
	}
	return c, nil
}

func checkSession(s *SessionInfo) error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: session message without a session", ErrControl)
	case !validID(s.ID):
		return fmt.Errorf("%w: %w: session id %q", ErrControl, ErrSession, s.ID)
	case len(s.Command) == 0 || len(s.Command) > MaxArgs:
		return fmt.Errorf("%w: %w: command of %d words (1..%d)", ErrControl, ErrSession, len(s.Command), MaxArgs)
	}
	n := len(s.Dir)
	for _, a := range s.Command {
		n += len(a)
	}
	if n > MaxArgBytes {
		return fmt.Errorf("%w: %w: command and directory of %d bytes (at most %d)", ErrControl, ErrSession, n, MaxArgBytes)
	}
	if err := checkSize(s.Cols, s.Rows); err != nil {
		return fmt.Errorf("%w: %w: %v", ErrControl, ErrSession, err)
	}
	return nil
}

// validID admits 1..MaxIDLen characters of [A-Za-z0-9_-].
func validID(id string) bool {
	if id == "" || len(id) > MaxIDLen || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}
