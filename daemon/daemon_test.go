package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// TestExitedSessionsAreReleased: sessions whose programs exit by themselves
// give back their goroutines and PTYs, and forgotten ones their emulators:
// a long-running daemon does not leak them.
func TestExitedSessionsAreReleased(t *testing.T) {
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	d, err := daemon.New(daemon.Options{Server: "http://127.0.0.1:1", Token: "tbm_test", KeepExited: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	for range 30 {
		id, err := d.Start(daemon.Spec{Argv: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := d.Session(id); ok {
			<-s.Done()
		}
	}
	// The one exited session kept has its emulator (two goroutines) and
	// nothing else.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for runtime.NumGoroutine() > goroutines+2 || openFDs(t) > fds {
		select {
		case <-tick.C:
		case <-timeout:
			buf := make([]byte, 1<<20)
			t.Fatalf("after 30 exited sessions: %d goroutines (%d before), %d fds (%d before)\n%s",
				runtime.NumGoroutine(), goroutines, openFDs(t), fds, buf[:runtime.Stack(buf, true)])
		}
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestCommandIsFoundInTheCallersPath: a command named without a slash is
// looked up in the PATH of the environment it is started with (the caller's,
// for 'tabbridge run'), not in the daemon's own.
func TestCommandIsFoundInTheCallersPath(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "tabbridge-test-tool"), []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{Server: "http://127.0.0.1:1", Token: "tbm_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	id, err := d.Start(daemon.Spec{Argv: []string{"tabbridge-test-tool"}, Env: []string{"PATH=/usr/bin:" + bin}})
	if err != nil {
		t.Fatalf("a command on the caller's PATH: %v", err)
	}
	s, _ := d.Session(id)
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the session did not end")
	}
	if s.ExitCode() != 7 {
		t.Fatalf("exit code %d, want 7 from the caller's tool", s.ExitCode())
	}
	_, err = d.Start(daemon.Spec{Argv: []string{"tabbridge-test-tool"}, Env: []string{"PATH=/usr/bin"}})
	if err == nil || !strings.Contains(err.Error(), "not found in the PATH it was run with (/usr/bin)") {
		t.Fatalf("a command on no PATH: %v", err)
	}
}

// TestRunningSessionsAreBounded: the server lists at most wire.MaxSessions
// of a machine's sessions, so the daemon refuses to start more than
// wire.MaxRunning at once, with a sentence for the person, rather than run
// sessions no viewer could reach; one that ends makes room.
func TestRunningSessionsAreBounded(t *testing.T) {
	d, err := daemon.New(daemon.Options{Server: "http://127.0.0.1:1", Token: "tbm_test", KeepExited: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	var first string
	for i := range wire.MaxRunning {
		id, err := d.Start(daemon.Spec{Argv: []string{"sleep", "600"}})
		if err != nil {
			t.Fatalf("session %d of %d: %v", i+1, wire.MaxRunning, err)
		}
		if first == "" {
			first = id
		}
	}
	_, err = d.Start(daemon.Spec{Argv: []string{"sleep", "600"}})
	if want := fmt.Sprintf("this machine already runs %d sessions", wire.MaxRunning); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("one session more: %v, want an error saying %q", err, want)
	}
	s, ok := d.Session(first)
	if !ok {
		t.Fatal("no first session")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() bool {
		_, err := d.Start(daemon.Spec{Argv: []string{"sleep", "600"}})
		return err == nil
	}, "no session could start after one ended")
}

// TestKeptExitedFitBesideTheRunning: however many exited sessions a daemon
// is told to keep, it keeps at most wire.MaxKeptExited, the room the
// server's wire.MaxSessions leaves beside wire.MaxRunning.
func TestKeptExitedFitBesideTheRunning(t *testing.T) {
	d, err := daemon.New(daemon.Options{Server: "http://127.0.0.1:1", Token: "tbm_test", KeepExited: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	var ids []string
	for range wire.MaxKeptExited + 1 {
		id, err := d.Start(daemon.Spec{Argv: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	testutil.Eventually(t, 30*time.Second, func() bool {
		_, kept := d.Info(ids[0])
		return !kept
	}, fmt.Sprintf("%d exited sessions kept; the most is %d", len(ids), wire.MaxKeptExited))
	if _, kept := d.Info(ids[1]); !kept {
		t.Fatalf("the second oldest of %d exited sessions was forgotten too", len(ids))
	}
}
