package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testbin"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// binWait bounds each step of the binary tests: builds and starts on a
// loaded machine.
const binWait = 60 * time.Second

// tabbridgeBinary is cmd/tabbridge, built once per test run.
func tabbridgeBinary(t testing.TB) string {
	t.Helper()
	return testbin.Build(t, repoPath(t, "cmd/tabbridge"))
}

// procLog collects a process's output; waitFor waits until it holds s, or
// the process exits (exited closed).
type procLog struct{ *testbin.Log }

func newProcLog() *procLog { return &procLog{testbin.NewLog()} }

func (l *procLog) waitFor(t *testing.T, s string, exited <-chan struct{}) {
	t.Helper()
	l.WaitFor(t, s, exited, binWait)
}

// proc is a running tabbridge process.
type proc struct {
	cmd    *exec.Cmd
	log    *procLog
	exited chan struct{} // closed when it has exited
	err    error         // its exit status, once exited is closed
}

// startBinary runs the tabbridge binary with args and env (added to a bare
// environment) until the test ends.
func startBinary(t *testing.T, stdin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(tabbridgeBinary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	p := &proc{cmd: cmd, log: newProcLog(), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(binWait):
			_ = cmd.Process.Kill()
			<-p.exited
			t.Errorf("%v did not stop on SIGTERM:\n%s", args, p.log.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its status.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(binWait):
		t.Fatalf("%v kept running:\n%s", p.cmd.Args, p.log.String())
		return nil
	}
}

// startServerBinary runs `tabbridge serve` on a free loopback port with a
// fresh SQLite database (and any flags more) and returns its URL once it
// listens.
func startServerBinary(t *testing.T, flags ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := startBinary(t, "", nil, append([]string{"serve", "--listen", addr, "--data-dir", t.TempDir()}, flags...)...)
	srv.log.waitFor(t, "tabbridge listening", srv.exited)
	return "http://" + addr
}

// TestDaemonTokenNeverOnACommandLine runs the real server and the real
// daemon binaries as a person would: the machine's enrol command from the
// web app, the token pasted on standard input, the daemon started with no
// token anywhere in its arguments or environment. A second install with the
// same token is refused and the person told; --token is refused; the
// enrolled daemon, restarted, gets back in at once.
func TestDaemonTokenNeverOnACommandLine(t *testing.T) {
	url := startServerBinary(t)
	env := &servertest.Env{URL: url}
	person := env.Person(t, "ada@example.com")
	var created struct {
		Machine struct{ ID string } `json:"machine"`
		Token   string              `json:"token"`
		Command string              `json:"command"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &created)
	if strings.Contains(created.Command, created.Token) {
		t.Fatalf("the command holds the token: %q", created.Command)
	}
	argv := strings.Fields(created.Command)
	if argv[0] != "tabbridge" {
		t.Fatalf("command %q", created.Command)
	}

	// Install A: enroll with the page's own command, token on stdin.
	home := t.TempDir()
	envA := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_RUNTIME_DIR=" + filepath.Join(home, "run")}
	if err := os.Mkdir(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	enroll := startBinary(t, created.Token+"\n", envA, argv[1:]...)
	if err := enroll.wait(t); err != nil {
		t.Fatalf("enroll: %v\n%s", err, enroll.log.String())
	}
	file := filepath.Join(home, "config", "tabbridge", "daemon.json")
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v %v", info, err)
	}

	a := startBinary(t, "", envA, "daemon")
	a.log.waitFor(t, "linked to server", a.exited)
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", a.cmd.Process.Pid, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(created.Token)) {
			t.Fatalf("the daemon's /proc %s holds the token: %q", f, b)
		}
	}

	// --token is refused, saying why.
	flagged := startBinary(t, "", envA, "daemon", "--server", url, "--token", created.Token)
	if err := flagged.wait(t); err == nil || !strings.Contains(flagged.log.String(), "readable by every user") {
		t.Fatalf("--token: %v\n%s", err, flagged.log.String())
	}

	// Install B, elsewhere, with the same token: refused, and A stays.
	homeB := t.TempDir()
	envB := []string{"HOME=" + homeB, "XDG_CONFIG_HOME=" + filepath.Join(homeB, "config"), "XDG_RUNTIME_DIR=" + homeB}
	enrollB := startBinary(t, created.Token+"\n", envB, argv[1:]...)
	if err := enrollB.wait(t); err != nil {
		t.Fatalf("enroll B: %v\n%s", err, enrollB.log.String())
	}
	b := startBinary(t, "", envB, "daemon")
	if err := b.wait(t); err == nil || !strings.Contains(b.log.String(), "belongs to another install") {
		t.Fatalf("the second install: %v\n%s", err, b.log.String())
	}
	status, page := person.Do("GET", "/machines", nil)
	if status != 200 || !strings.Contains(string(page), "Another daemon tried to use this machine") || !strings.Contains(string(page), "Connected now") {
		t.Fatalf("the machines page after the refusal: %d\n%s", status, page)
	}
	if n := strings.Count(a.log.String(), "linked to server"); n != 1 {
		t.Fatalf("install A lost its link (%d links):\n%s", n, a.log.String())
	}

	// A killed and restarted: the same install gets back in at once.
	_ = a.cmd.Process.Kill()
	<-a.exited
	again := startBinary(t, "", envA, "daemon")
	again.log.waitFor(t, "linked to server", again.exited)
	if strings.Contains(again.log.String(), "reconnecting") {
		t.Fatalf("the restarted daemon did not get in at once:\n%s", again.log.String())
	}
}
