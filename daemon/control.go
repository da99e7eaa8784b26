package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// StartRequest is what `tabbridge run` sends the local daemon: one JSON line.
type StartRequest struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
	Env  []string `json:"env"`
	Cols int      `json:"cols"`
	Rows int      `json:"rows"`
}

// StartReply is the daemon's one-line answer.
type StartReply struct {
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
}

// maxControlLine bounds one request (argv and environment). The environment
// goes only to the daemon, never to the server, so it has no wire limit but
// this one; the command and directory also keep within the wire's (checkSpec).
const maxControlLine = 4 << 20

// DefaultControlPath is where the daemon listens for `tabbridge run`:
// $XDG_RUNTIME_DIR/tabbridge/daemon.sock, else ~/.tabbridge/daemon.sock.
func DefaultControlPath() string {
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		return filepath.Join(dir, "tabbridge", "daemon.sock")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".tabbridge", "daemon.sock")
}

// ListenControl opens the daemon's control socket at path, with the socket
// itself 0600: whoever can start sessions can run commands as this user, so
// only this user may. A missing directory is created 0700; an existing one
// keeps its mode, but must belong to this user and be writable by no one
// else (who could otherwise put their own socket in its place).
func ListenControl(path string) (net.Listener, error) {
	if err := controlDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket: a daemon already listens on %s", path)
	}
	os.Remove(path) // a stale socket left by a daemon that died
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := privateSocket(path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// controlDir makes sure dir is a directory only this user can write to,
// creating it (0700) when it is missing; it changes no existing directory.
func controlDir(dir string) error {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return os.Chmod(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory; choose another --control path", dir)
	}
	return privateDir(dir, info)
}

// ServeControl starts a session for each request on ln until ctx ends.
func (d *Daemon) ServeControl(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("control socket: %w", err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.serveRequest(c) }()
	}
}

func (d *Daemon) serveRequest(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReaderSize(c, 64<<10)
	line, err := readLine(r)
	reply := StartReply{}
	var spec Spec
	if err == nil {
		spec, err = decodeStartRequest(line)
	}
	if err == nil {
		reply.ID, err = d.Start(spec)
	}
	if err != nil {
		reply.Error = err.Error()
	}
	b, _ := json.Marshal(reply)
	c.Write(append(b, '\n'))
}

// decodeStartRequest reads one request line: exactly one JSON object of
// StartRequest's fields, each of its type, with a command, within the
// wire's limits (checkSpec). A size left out (or not positive) is 80x24.
func decodeStartRequest(line []byte) (Spec, error) {
	const shape = `send one line {"argv": ["<command>", "<arg>"…], "dir": "<directory>", "env": ["NAME=value"…], "cols": N, "rows": N}`
	var req StartRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ) && typ.Field != "":
			return Spec{}, fmt.Errorf("the request's %q is %s, not the right type; %s", typ.Field, typ.Value, shape)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return Spec{}, fmt.Errorf("the request has %s; %s", strings.TrimPrefix(err.Error(), "json: "), shape)
		}
		return Spec{}, fmt.Errorf("the request is not one JSON object (%v); %s", err, shape)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, fmt.Errorf("the request has more than one JSON value; %s", shape)
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return Spec{}, errors.New("no command to run")
	}
	spec := Spec{Argv: req.Argv, Dir: req.Dir, Env: req.Env, Cols: req.Cols, Rows: req.Rows}
	if spec.Cols <= 0 || spec.Rows <= 0 {
		spec.Cols, spec.Rows = 80, 24
	}
	if err := checkSpec(spec); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// encodeStartRequest is the request line for req. JSON carries only UTF-8
// text: a word, directory or variable that is not would reach the daemon
// with its bytes replaced (U+FFFD), so another command would run; it is
// refused instead, naming it.
func encodeStartRequest(req StartRequest) ([]byte, error) {
	for i, a := range req.Argv {
		if !utf8.ValidString(a) {
			return nil, fmt.Errorf("word %d of the command (%q) is not UTF-8 text, which a session cannot carry; rename the file or run a script that names it", i+1, a)
		}
	}
	if !utf8.ValidString(req.Dir) {
		return nil, fmt.Errorf("the working directory %q is not UTF-8 text, which a session cannot carry; run from another directory", req.Dir)
	}
	for _, kv := range req.Env {
		if !utf8.ValidString(kv) {
			name, _, _ := strings.Cut(kv, "=")
			return nil, fmt.Errorf("the environment variable %q is not UTF-8 text, which the daemon cannot be sent; unset it for this command (env -u %s tabbridge run …)", name, name)
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if len(b) > maxControlLine {
		return nil, fmt.Errorf("your environment and command are %d bytes (limit %d); unset large environment variables, or run a script that holds the command", len(b), maxControlLine)
	}
	return append(b, '\n'), nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, fmt.Errorf("read request: %w", err)
		}
		line = append(line, chunk...)
		if len(line) > maxControlLine {
			return nil, fmt.Errorf("the request is over %d bytes", maxControlLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// RequestStart asks the daemon listening on path to start a session.
func RequestStart(path string, req StartRequest) (string, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("no daemon listens on %s (start one with 'tabbridge daemon', after 'tabbridge daemon enroll'): %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	b, err := encodeStartRequest(req)
	if err != nil {
		return "", err
	}
	if _, err := c.Write(b); err != nil {
		return "", fmt.Errorf("send request: %w", err)
	}
	line, err := readLine(bufio.NewReader(c))
	if err != nil {
		return "", err
	}
	var reply StartReply
	if err := json.Unmarshal(line, &reply); err != nil {
		return "", fmt.Errorf("the daemon answered %q", line)
	}
	if reply.Error != "" {
		return "", errors.New(reply.Error)
	}
	return reply.ID, nil
}
