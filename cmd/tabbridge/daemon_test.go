//go:build !windows

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testbin"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// daemonWait bounds each step through a real daemon process.
const daemonWait = testutil.WaitMedium

// logWriter collects what a command writes; waitFor waits until it holds s.
type logWriter struct{ *testbin.Log }

func newLogWriter() *logWriter { return &logWriter{testbin.NewLog()} }

func (w *logWriter) waitFor(t *testing.T, s string) {
	t.Helper()
	w.WaitFor(t, s, nil, daemonWait)
}

// newMachine starts a server and creates a machine on it, returning the
// server's URL, the person who owns the machine, its id and its token.
func newMachine(t *testing.T) (url string, person *servertest.Client, id, token string) {
	t.Helper()
	env := servertest.Start(t, storetest.SQLite, nil)
	person = env.Person(t, "ada@example.com")
	var out struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &out)
	return env.URL, person, out.Machine.ID, out.Token
}

// enroll runs `tabbridge daemon enroll` with token on standard input and
// returns the credentials file it wrote (a new install each call).
func enroll(t *testing.T, url, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tabbridge", "daemon.json")
	stdin = strings.NewReader(token + "\n")
	defer func() { stdin = os.Stdin }()
	if err := run(context.Background(), []string{"daemon", "enroll", "--server", url, "--credentials", path}, func(string) string { return "" }, io.Discard, nil); err != nil {
		t.Fatalf("enroll: %v", err)
	}
	return path
}

// startDaemon runs `tabbridge daemon` in-process; its error arrives on the
// channel returned (a test that takes it puts it back). The daemon is
// interrupted when the test ends.
func startDaemon(t *testing.T, log *logWriter, args ...string) (done chan error, interrupt func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"daemon"}, args...), func(string) string { return "" }, log, nil)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			done <- err // for a later cleanup
		case <-time.After(daemonWait):
			t.Error("the daemon did not stop when interrupted")
		}
	})
	return done, cancel
}

// TestRevokedTokenEndsTheDaemon: revoking the machine makes the daemon
// exit with the refusal, instead of waiting for a signal.
func TestRevokedTokenEndsTheDaemon(t *testing.T) {
	url, person, id, token := newMachine(t)
	log := newLogWriter()
	done, _ := startDaemon(t, log, "--credentials", enroll(t, url, token), "--control", filepath.Join(t.TempDir(), "d.sock"))
	log.waitFor(t, "linked to server")
	person.MustJSON("DELETE", "/api/machines/"+id, nil, 204, nil)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "refused the machine token") {
			t.Fatalf("the daemon returned %v, want the refusal", err)
		}
		done <- err
	case <-time.After(daemonWait):
		t.Fatalf("the daemon kept running after its token was revoked:\n%s", log.String())
	}
}

// sessions lists the machine's sessions as the server has them.
// waitOnline reads the person's machine list until machine is online: a
// daemon logs "linked" once its socket opens, and the server registers the
// link just after.
func waitOnline(t *testing.T, person *servertest.Client, machine string) {
	t.Helper()
	var list struct {
		Machines []struct {
			ID     string `json:"id"`
			Online bool   `json:"online"`
		} `json:"machines"`
	}
	testutil.Eventually(t, daemonWait, func() bool {
		person.MustJSON("GET", "/api/machines", nil, 200, &list)
		for _, m := range list.Machines {
			if m.ID == machine && m.Online {
				return true
			}
		}
		return false
	}, "machine "+machine+" never listed online")
}

func sessions(person *servertest.Client, machine string) []struct {
	ID       string `json:"id"`
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exitCode"`
} {
	var out struct {
		Sessions []struct {
			ID       string `json:"id"`
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitCode"`
		} `json:"sessions"`
	}
	person.MustJSON("GET", "/api/machines/"+machine+"/sessions", nil, 200, &out)
	return out.Sessions
}

// TestStoppedDaemonReportsItsSessionsExited: interrupting the daemon stops
// its sessions while its link is up, so the server lists them exited, not
// running on a machine that has gone.
func TestStoppedDaemonReportsItsSessionsExited(t *testing.T) {
	url, person, id, token := newMachine(t)
	log := newLogWriter()
	done, interrupt := startDaemon(t, log, "--credentials", enroll(t, url, token), "--control", filepath.Join(t.TempDir(), "d.sock"), "--", "sleep", "1000")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the daemon's log:\n%s", log.String())
		}
	})
	testutil.Eventually(t, daemonWait, func() bool { return len(sessions(person, id)) > 0 }, // no event to wait on but the listing
		"the session was never listed")
	interrupt()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the interrupted daemon returned %v", err)
		}
		done <- err
	case <-time.After(daemonWait):
		t.Fatalf("the daemon did not stop:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "stopping 1 sessions") {
		t.Errorf("the daemon did not say it stopped its session:\n%s", log.String())
	}
	// The daemon wrote the exit before closing its link; the server handles
	// the frame on its own reader, so the listing may lag the daemon's exit.
	testutil.Eventually(t, daemonWait, func() bool {
		got := sessions(person, id)
		return len(got) == 1 && got[0].Exited
	}, "after the daemon stopped the server does not list the session exited")
}

// TestSecondDaemonStartsNothing: a daemon that fails to start because
// another listens on its control socket does not leave its command running.
func TestSecondDaemonStartsNothing(t *testing.T) {
	url, _, _, token := newMachine(t)
	control := filepath.Join(t.TempDir(), "d.sock")
	log := newLogWriter()
	creds := enroll(t, url, token)
	startDaemon(t, log, "--credentials", creds, "--control", control)
	log.waitFor(t, "daemon ready")
	// A sleep no other test runs, to find among the processes.
	arg := fmt.Sprintf("%d.%d", 1000+os.Getpid()%1000, time.Now().UnixNano()%1000)
	err := run(context.Background(), []string{"daemon", "--credentials", creds, "--control", control, "--", "sleep", arg},
		func(string) string { return "" }, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "already listens") {
		t.Fatalf("a second daemon on the same control socket: %v", err)
	}
	// Had the command started, it would be running by now: Start returns
	// once the program is executed.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.HasSuffix(string(b), "sleep\x00"+arg+"\x00") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the daemon that failed to start left its command running (pid %d)", pid)
		}
	}
}

// TestDaemonNamesWhatIsMissing: a daemon started without credentials names
// the enrol step, or the variable to set with TABBRIDGE_MACHINE_TOKEN.
func TestDaemonNamesWhatIsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.json")
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "tabbridge daemon enroll --server URL"},
		{map[string]string{"TABBRIDGE_MACHINE_TOKEN": "tbm_x"}, "--server (or TABBRIDGE_SERVER) is required"},
		{map[string]string{"TABBRIDGE_MACHINE_TOKEN": "tbm_x", "TABBRIDGE_SERVER": "http://127.0.0.1:1"}, "needs TABBRIDGE_INSTALL_ID too"},
	} {
		err := run(context.Background(), []string{"daemon", "--credentials", missing, "--control", filepath.Join(t.TempDir(), "d.sock")}, func(k string) string { return c.env[k] }, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error saying %q", c.env, err, c.want)
		}
	}
}

// TestDaemonLogLevel: the daemon takes --log-level as serve does: warn keeps
// its routine info lines out of the log, and a level it does not know stops
// it with a message naming the choices.
func TestDaemonLogLevel(t *testing.T) {
	url, person, id, token := newMachine(t)
	log := newLogWriter()
	_, interrupt := startDaemon(t, log, "--log-level", "warn", "--credentials", enroll(t, url, token), "--control", filepath.Join(t.TempDir(), "d.sock"))
	waitOnline(t, person, id)
	interrupt()
	if s := log.String(); strings.Contains(s, "linked to server") || strings.Contains(s, "daemon ready") {
		t.Fatalf("at warn the daemon logged info lines:\n%s", s)
	}
	err := run(context.Background(), []string{"daemon", "--log-level", "loud", "--credentials", enroll(t, url, token), "--control", filepath.Join(t.TempDir(), "e.sock")},
		func(string) string { return "" }, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
		t.Fatalf("--log-level loud: %v", err)
	}
}
