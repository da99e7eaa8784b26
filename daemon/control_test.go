package daemon_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// controlDaemon starts a daemon (its server unreachable) serving its control
// socket until the test ends, and returns it with the socket's path.
func controlDaemon(t *testing.T) (*daemon.Daemon, string) {
	t.Helper()
	d, err := daemon.New(daemon.Options{Server: "http://127.0.0.1:1", Token: "tbm_test"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run", "daemon.sock")
	ln, err := daemon.ListenControl(path)
	if err != nil {
		d.Close(context.Background())
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.ServeControl(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		d.Close(context.Background())
	})
	return d, path
}

func TestRunStartsSessionsThroughTheControlSocket(t *testing.T) {
	d, path := controlDaemon(t)

	info, _ := os.Stat(path)
	dir, _ := os.Stat(filepath.Dir(path))
	if info.Mode().Perm() != 0o600 || dir.Mode().Perm() != 0o700 {
		t.Fatalf("socket %v in directory %v: only this user may start sessions", info.Mode().Perm(), dir.Mode().Perm())
	}
	if _, err := daemon.ListenControl(path); err == nil || !strings.Contains(err.Error(), "already listens") {
		t.Fatalf("second daemon on the same socket: %v", err)
	}

	ids := map[string]bool{}
	for i := 0; i < 2; i++ { // a daemon holds many sessions
		id, err := daemon.RequestStart(path, daemon.StartRequest{Argv: []string{"sh", "-c", "echo started; exit 3"}, Dir: t.TempDir()})
		if err != nil || id == "" {
			t.Fatalf("start: %q %v", id, err)
		}
		ids[id] = true
		s, ok := d.Session(id)
		if !ok {
			t.Fatalf("session %s not held", id)
		}
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("session did not end")
		}
		if s.ExitCode() != 3 {
			t.Fatalf("exit code %d", s.ExitCode())
		}
	}
	if len(ids) != 2 {
		t.Fatalf("session ids %v", ids)
	}
	if _, err := daemon.RequestStart(path, daemon.StartRequest{}); err == nil || !strings.Contains(err.Error(), "no command") {
		t.Fatalf("empty command: %v", err)
	}
	if _, err := daemon.RequestStart(path, daemon.StartRequest{Argv: []string{"/no/such/program"}}); err == nil {
		t.Fatal("a missing program started")
	}
	// A command the server could not list is refused, saying the limit it
	// breaks.
	for _, tc := range []struct {
		req  daemon.StartRequest
		want string
	}{
		{daemon.StartRequest{Argv: append([]string{"echo"}, strings.Fields(strings.Repeat("word ", wire.MaxArgs))...)}, fmt.Sprintf("%d words, more than the %d", wire.MaxArgs+1, wire.MaxArgs)},
		{daemon.StartRequest{Argv: []string{"echo", strings.Repeat("a", wire.MaxArgBytes)}}, fmt.Sprintf("more than the %d a session", wire.MaxArgBytes)},
		{daemon.StartRequest{Argv: []string{"true"}, Dir: "/" + strings.Repeat("d", wire.MaxArgBytes)}, fmt.Sprintf("more than the %d a session", wire.MaxArgBytes)},
		{daemon.StartRequest{Argv: []string{"echo", strings.Repeat("\x01", wire.MaxArgBytes-len("echo"))}}, fmt.Sprintf("as JSON, more than the %d", wire.MaxControl)},
		{daemon.StartRequest{Argv: []string{"true"}, Cols: wire.MaxCols + 1, Rows: 24}, fmt.Sprintf("larger than %dx%d", wire.MaxCols, wire.MaxRows)},
	} {
		id, err := daemon.RequestStart(path, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("start %d words in %d bytes: %q %v, want an error saying %q", len(tc.req.Argv), len(strings.Join(tc.req.Argv, "")), id, err, tc.want)
		}
	}
	// Garbage on the socket is answered, not a crash.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("not json\n"))
	buf := make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := c.Read(buf)
	c.Close()
	if !strings.Contains(string(buf[:n]), "not one JSON object") {
		t.Fatalf("garbage answered %q", buf[:n])
	}
	if _, err := daemon.RequestStart(filepath.Join(t.TempDir(), "none.sock"), daemon.StartRequest{Argv: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "no daemon listens") {
		t.Fatalf("no daemon: %v", err)
	}
}

// TestControlSocketLeavesAnExistingDirectoryAlone: --control in a directory
// the daemon did not create keeps that directory's mode; one other users
// can write to is refused, and nothing is created in it.
func TestControlSocketLeavesAnExistingDirectoryAlone(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := daemon.ListenControl(filepath.Join(shared, "daemon.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if info, _ := os.Stat(shared); info.Mode().Perm() != 0o755 {
		t.Fatalf("an existing directory went from 0755 to %v", info.Mode().Perm())
	}

	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(open, "daemon.sock")
	if _, err := daemon.ListenControl(path); err == nil || !strings.Contains(err.Error(), "writable by other users") || !strings.Contains(err.Error(), open) {
		t.Fatalf("a socket in a world-writable directory: %v", err)
	}
	if info, _ := os.Stat(open); info.Mode().Perm() != 0o777 {
		t.Fatalf("a refused directory went from 0777 to %v", info.Mode().Perm())
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused directory got a socket: %v", err)
	}
}

// TestLargeEnvironmentsStartSessions: an environment of a few MiB (the
// control request carries it whole) starts a session; one past the limit is
// refused before it is sent, saying how large it is and what to do.
func TestLargeEnvironmentsStartSessions(t *testing.T) {
	d, err := daemon.New(daemon.Options{Server: "http://127.0.0.1:1", Token: "tbm_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	path := filepath.Join(t.TempDir(), "daemon.sock")
	ln, err := daemon.ListenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.ServeControl(ctx, ln) }()
	defer func() { cancel(); <-done }()

	// Linux lets a program have 2 MiB of arguments and environment with the
	// usual 8 MiB stack, and 128 KiB in one variable.
	env := []string{"PATH=/usr/bin:/bin"}
	for i := range 12 {
		env = append(env, fmt.Sprintf("BIG%d=%s", i, strings.Repeat("x", 100<<10)))
	}
	if id, err := daemon.RequestStart(path, daemon.StartRequest{Argv: []string{"true"}, Env: env}); err != nil || id == "" {
		t.Fatalf("a 1.2 MiB environment: %q %v", id, err)
	}
	env = append(env, "HUGE="+strings.Repeat("x", 5<<20))
	_, err = daemon.RequestStart(path, daemon.StartRequest{Argv: []string{"true"}, Env: env})
	if err == nil || !strings.Contains(err.Error(), "(limit 4194304); unset large environment variables") {
		t.Fatalf("a 5 MiB environment: %v", err)
	}
}
