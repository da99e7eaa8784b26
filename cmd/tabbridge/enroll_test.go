//go:build !windows

package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/relay/wire"
)

// TestTokenFlagIsRefused: --token, which put the token where every local
// user reads it, is refused with the reason and the way that replaces it,
// by the daemon and by enroll alike, before anything starts.
func TestTokenFlagIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"daemon", "--server", "http://127.0.0.1:1", "--token", "tbm_x"},
		{"daemon", "--token=tbm_x", "--", "sleep", "1"},
		{"daemon", "enroll", "--server", "http://127.0.0.1:1", "--token", "tbm_x"},
	} {
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, nil)
		if !errors.Is(err, errTokenFlag) || !strings.Contains(err.Error(), "readable by every user") || !strings.Contains(err.Error(), "tabbridge daemon enroll") {
			t.Errorf("%q: got %v, want the refusal of --token", args, err)
		}
	}
}

// TestEnrollWritesAPrivateFile: enroll saves server, token and a random
// install id in a 0600 file in a 0700 directory; enrolling again keeps the
// install id; a token the server does not know saves nothing.
func TestEnrollWritesAPrivateFile(t *testing.T) {
	url, _, _, token := newMachine(t)
	path := enroll(t, url, token)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("credentials file mode %v, want 0600", perm)
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Errorf("credentials directory mode %v, want 0700", dir.Mode().Perm())
	}
	c, err := daemon.LoadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != url || c.Token != token || len(c.Install) != 32 {
		t.Fatalf("saved %+v", c)
	}
	// Enrolling the same file again keeps the install.
	stdin = strings.NewReader(token)
	defer func() { stdin = os.Stdin }()
	if err := run(context.Background(), []string{"daemon", "enroll", "--server", url, "--credentials", path}, func(string) string { return "" }, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := daemon.LoadCredentials(path); again.Install != c.Install {
		t.Errorf("enrolling again changed the install id %s → %s", c.Install, again.Install)
	}
	other := filepath.Join(t.TempDir(), "x", "daemon.json")
	stdin = strings.NewReader("tbm_not-a-real-token\n")
	err = run(context.Background(), []string{"daemon", "enroll", "--server", url, "--credentials", other}, func(string) string { return "" }, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "does not know this machine token") {
		t.Fatalf("enrolling an unknown token: %v", err)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a refused token was saved: %v", err)
	}
}

// TestDaemonRefusesAnOpenCredentialsFile: a token file others can read may
// have leaked; the daemon says so and how to fix it, and does not start.
func TestDaemonRefusesAnOpenCredentialsFile(t *testing.T) {
	url, _, _, token := newMachine(t)
	path := enroll(t, url, token)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"daemon", "--credentials", path, "--control", filepath.Join(t.TempDir(), "d.sock")}, func(string) string { return "" }, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("an open credentials file: %v", err)
	}
}

// TestSecondInstallIsRefused: a daemon enrolled elsewhere with the same
// token does not take the machine over: it is refused and stops with the
// reason; the first daemon stays linked; the machines page and API tell the
// person.
func TestSecondInstallIsRefused(t *testing.T) {
	url, person, id, token := newMachine(t)
	logA := newLogWriter()
	startDaemon(t, logA, "--credentials", enroll(t, url, token), "--control", filepath.Join(t.TempDir(), "a.sock"))
	logA.waitFor(t, "linked to server")
	waitOnline(t, person, id)

	logB := newLogWriter()
	doneB, _ := startDaemon(t, logB, "--credentials", enroll(t, url, token), "--control", filepath.Join(t.TempDir(), "b.sock"))
	select {
	case err := <-doneB:
		if !errors.Is(err, daemon.ErrOtherInstall) || !strings.Contains(err.Error(), "Create a new machine") {
			t.Fatalf("the second install's daemon returned %v, want ErrOtherInstall", err)
		}
		doneB <- err
	case <-time.After(daemonWait):
		t.Fatalf("the second install's daemon kept running:\n%s", logB.String())
	}
	if strings.Contains(logB.String(), "linked to server") {
		t.Fatalf("the second install linked:\n%s", logB.String())
	}
	if n := strings.Count(logA.String(), "linked to server"); n != 1 {
		t.Fatalf("the first daemon lost its link (%d links):\n%s", n, logA.String())
	}
	var list struct {
		Machines []struct {
			ID             string     `json:"id"`
			Online         bool       `json:"online"`
			OtherInstallAt *time.Time `json:"otherInstallAt"`
		} `json:"machines"`
	}
	person.MustJSON("GET", "/api/machines", nil, 200, &list)
	if len(list.Machines) != 1 || !list.Machines[0].Online || list.Machines[0].OtherInstallAt == nil {
		t.Fatalf("machines after the refusal: %+v", list.Machines)
	}
	status, page := person.Do("GET", "/machines", nil)
	if status != 200 || !strings.Contains(string(page), `id="machine-`+id+`-other-install"`) ||
		!strings.Contains(string(page), "Another daemon tried to use this machine") {
		t.Fatalf("the machines page does not tell the person: %d\n%s", status, page)
	}
}

// TestSameInstallReplacesItsStaleLink: a daemon restarted after a network
// loss, while the server still holds its old link, gets back in at once:
// the server drops the stale link of the same install for the new one.
func TestSameInstallReplacesItsStaleLink(t *testing.T) {
	url, _, _, token := newMachine(t)
	path := enroll(t, url, token)
	c, err := daemon.LoadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	// The stale link: a socket of this install that the server still holds
	// and nobody reads, as after a network loss the server has not noticed.
	stale, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http")+"/ws/daemon",
		http.Header{"Authorization": {"Bearer " + token}, wire.InstallHeader: {c.Install}})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	log := newLogWriter()
	startDaemon(t, log, "--credentials", path, "--control", filepath.Join(t.TempDir(), "d.sock"))
	log.waitFor(t, "linked to server")
	if strings.Contains(log.String(), "reconnecting") {
		t.Fatalf("the restarted daemon did not get in at once:\n%s", log.String())
	}
	_ = stale.SetReadDeadline(time.Now().Add(daemonWait))
	for {
		if _, _, err := stale.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) || !strings.Contains(err.Error(), "timeout") {
				break // the server closed the stale link
			}
			t.Fatalf("the stale link stayed open: %v", err)
		}
	}
}

// TestDaemonFromTheEnvironment: without a credentials file, the token and
// install id in the environment (containers) link the daemon.
func TestDaemonFromTheEnvironment(t *testing.T) {
	url, _, _, token := newMachine(t)
	env := map[string]string{"TABBRIDGE_SERVER": url, "TABBRIDGE_MACHINE_TOKEN": token, "TABBRIDGE_INSTALL_ID": daemon.NewInstallID()}
	log := newLogWriter()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"daemon", "--credentials", filepath.Join(t.TempDir(), "none.json"), "--control", filepath.Join(t.TempDir(), "d.sock")},
			func(k string) string { return env[k] }, log, nil)
	}()
	log.waitFor(t, "linked to server")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the daemon returned %v", err)
		}
	case <-time.After(daemonWait):
		t.Fatal("the daemon did not stop")
	}
}
