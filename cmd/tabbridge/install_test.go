//go:build !windows

package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/tabbridge/tabbridge/daemon"
	"github.com/tabbridge/tabbridge/internal/testbin"
)

// tabbridgeBinary is this command, built once per test run: install writes
// the path of the running program into the service, so it must be the real
// binary, not the test.
func tabbridgeBinary(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, ".")
}

// splitExec splits a unit's command line the way systemd does for the
// quoting systemdQuote writes: double quotes with \\ and \" inside, %% and
// $$ for a literal % and $.
func splitExec(line string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case (c == '%' || c == '$') && i+1 < len(line) && line[i+1] == c:
			i++
			w.WriteByte(c)
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestInstallWritesAUnitThatStartsTheDaemon: 'tabbridge daemon install'
// writes a systemd user unit that holds no token, that systemd-analyze
// accepts, and whose ExecStart, run as systemd would, starts the daemon and
// links it to the server. Uninstall removes it. (No systemd user manager
// runs on this machine: see docs/DECISIONS.md.)
func TestInstallWritesAUnitThatStartsTheDaemon(t *testing.T) {
	url, person, id, token := newMachine(t)
	home := filepath.Join(t.TempDir(), "home with space")
	runtimeDir := filepath.Join(t.TempDir(), "run")
	for _, d := range []string{home, runtimeDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_RUNTIME_DIR=" + runtimeDir, "PATH=" + os.Getenv("PATH")}
	tb := tabbridgeBinary(t)
	command := func(stdin string, args ...string) string {
		t.Helper()
		c := exec.Command(tb, args...)
		c.Env, c.Stdin = env, strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("tabbridge %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	command(token+"\n", "daemon", "enroll", "--server", url)
	command("", "daemon", "install", "--no-start")

	unitPath := filepath.Join(home, ".config", "systemd", "user", "tabbridge-daemon.service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(unit, []byte(token)) || bytes.Contains(unit, []byte("tbm_")) {
		t.Fatalf("the unit holds the token:\n%s", unit)
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		verify := exec.Command(sa, "verify", "--user", unitPath)
		verify.Env = append(env, "SYSTEMD_LOG_LEVEL=notice")
		if out, err := verify.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("systemd-analyze is not installed (apt-get install systemd)")
	} else {
		t.Log("systemd-analyze not installed: the unit is not verified")
	}

	var execStart string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	argv := splitExec(execStart)
	if len(argv) < 2 || argv[0] != tb || argv[1] != "daemon" {
		t.Fatalf("ExecStart %q splits into %q", execStart, argv)
	}
	// As the user manager runs it: the unit's command, the user's
	// environment, no terminal.
	log := newLogWriter()
	d := exec.Command(argv[0], argv[1:]...)
	d.Env, d.Stdout, d.Stderr = env, log, log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = d.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = d.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(daemonWait):
			_ = d.Process.Kill()
			t.Error("the unit's daemon did not stop on SIGINT")
		}
	})
	log.waitFor(t, "linked to server")
	waitOnline(t, person, id)

	command("", "daemon", "uninstall", "--no-stop")
	if _, err := os.Stat(unitPath); !os.IsNotExist(err) {
		t.Fatalf("uninstall left the unit: %v", err)
	}
}

// TestServicesHoldNoToken: the launchd agent and the scheduled task run the
// daemon with the credentials file, never the token; the plist is
// well-formed XML with the program's words in order.
func TestServicesHoldNoToken(t *testing.T) {
	spec := installSpec{exe: "/Applications/Tab Bridge/tabbridge", credentials: "/Users/ada/Library/Application Support/tabbridge/daemon.json",
		home: "/Users/ada", configDir: "/Users/ada/Library/Application Support", uid: "501"}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		spec.goos = goos
		svc, err := serviceFor(spec)
		if err != nil {
			t.Fatal(err)
		}
		all := svc.name
		for _, body := range svc.files {
			all += body
		}
		for _, argv := range append(svc.start, svc.stop...) {
			all += strings.Join(argv, " ")
		}
		if strings.Contains(all, "tbm_") || !strings.Contains(all, spec.credentials) {
			t.Errorf("%s: the service does not run the daemon from its credentials file:\n%s", goos, all)
		}
	}
	plist := launchdPlist(spec)
	dec := xml.NewDecoder(strings.NewReader(plist))
	var words []string
	inArgs := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the plist is not XML: %v\n%s", err, plist)
		}
		if cd, ok := tok.(xml.CharData); ok {
			s := strings.TrimSpace(string(cd))
			switch {
			case s == "ProgramArguments":
				inArgs = true
			case inArgs && s != "":
				words = append(words, s)
			}
		}
		if end, ok := tok.(xml.EndElement); ok && end.Name.Local == "array" {
			inArgs = false
		}
	}
	if strings.Join(words, "|") != strings.Join(spec.daemonArgv(), "|") {
		t.Fatalf("plist ProgramArguments %q, want %q", words, spec.daemonArgv())
	}
}

// TestHelpListsEveryCommand: 'tabbridge --help' lists each command on one
// line, and an unknown command shows the same list.
func TestHelpListsEveryCommand(t *testing.T) {
	out, err := exec.Command(tabbridgeBinary(t), "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// "  name   one line": the name is what comes before two spaces.
		if name, summary, ok := strings.Cut(strings.TrimSpace(line), "  "); ok && strings.HasPrefix(line, "  ") && strings.TrimSpace(summary) != "" {
			listed[name] = true
		}
	}
	for _, c := range []string{"serve", "daemon", "daemon enroll", "daemon install", "daemon uninstall", "run", "version", "help"} {
		if !listed[c] {
			t.Errorf("--help does not list %q:\n%s", c, out)
		}
	}
	b, err := exec.Command(tabbridgeBinary(t), "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(b), `unknown command "frobnicate"`) || !strings.Contains(string(b), "daemon install") {
		t.Fatalf("an unknown command: %v\n%s", err, b)
	}
}

// TestEnrollAtATerminalDoesNotEcho: run at a terminal, enroll prompts for
// the token and reads it without echoing it onto the screen (where it would
// stay in the scrollback), then saves it.
func TestEnrollAtATerminalDoesNotEcho(t *testing.T) {
	url, _, _, token := newMachine(t)
	path := filepath.Join(t.TempDir(), "daemon.json")
	c := exec.Command(tabbridgeBinary(t), "daemon", "enroll", "--server", url, "--credentials", path)
	ptmx, err := pty.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	screen := newLogWriter()
	go func() { _, _ = io.Copy(screen, ptmx) }()
	screen.waitFor(t, "Paste the machine token")
	if _, err := ptmx.Write([]byte(token + "\r")); err != nil {
		t.Fatal(err)
	}
	screen.waitFor(t, "Enrolled")
	if err := c.Wait(); err != nil {
		t.Fatalf("enroll: %v\n%s", err, screen.String())
	}
	if strings.Contains(screen.String(), strings.TrimPrefix(token, "tbm_")) {
		t.Fatalf("the token was echoed:\n%q", screen.String())
	}
	if got, err := daemon.LoadCredentials(path); err != nil || got.Token != token {
		t.Fatalf("saved %+v, %v", got, err)
	}
}
