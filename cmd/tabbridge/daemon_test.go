package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

const daemonWait = 30 * time.Second

// logWriter collects what a command writes and tells waiters of each write.
type logWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // capacity 1
}

func newLogWriter() *logWriter { return &logWriter{changed: make(chan struct{}, 1)} }

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor waits until the log holds s.
func (w *logWriter) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(daemonWait)
	for !strings.Contains(w.String(), s) {
		select {
		case <-w.changed:
		case <-timeout:
			t.Fatalf("the log never said %q:\n%s", s, w.String())
		}
	}
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

// startDaemon runs `tabbridge daemon` in-process; its error arrives on the
// channel returned (a test that takes it puts it back). The daemon is
// interrupted when the test ends.
func startDaemon(t *testing.T, log *logWriter, args ...string) chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
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
	return done
}

// TestRevokedTokenEndsTheDaemon: revoking the machine makes the daemon
// exit with the refusal, instead of waiting for a signal.
func TestRevokedTokenEndsTheDaemon(t *testing.T) {
	url, person, id, token := newMachine(t)
	log := newLogWriter()
	done := startDaemon(t, log, "--server", url, "--token", token, "--control", filepath.Join(t.TempDir(), "d.sock"))
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
