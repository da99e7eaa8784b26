package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/tabbridge/tabbridge/daemon"
)

// exitRefused is the daemon's exit status when the server refuses its
// token or install: restarting cannot help, so the service managers are told
// not to (systemd's RestartPreventExitStatus).
const exitRefused = 3

// service is how one platform starts the daemon at login: files to write
// and commands that load or unload them. The token is in none of them: the
// daemon reads it from the credentials file.
type service struct {
	name  string            // what the person reads: "systemd user unit"
	files map[string]string // path → contents
	start [][]string        // run after writing, in order
	stop  [][]string        // run before removing, in order; failures ignored
}

// installSpec is what the service runs.
type installSpec struct {
	goos, exe, credentials, home, configDir, uid string
}

// serviceFor describes the service for spec.goos: a systemd user unit on
// Linux, a launchd agent on macOS, a scheduled task at logon on Windows.
func serviceFor(s installSpec) (service, error) {
	switch s.goos {
	case "linux":
		unit := filepath.Join(s.configDir, "systemd", "user", "tabbridge-daemon.service")
		return service{name: "systemd user unit " + unit, files: map[string]string{unit: systemdUnit(s)},
			start: [][]string{{"systemctl", "--user", "daemon-reload"}, {"systemctl", "--user", "enable", "--now", "tabbridge-daemon.service"}},
			stop:  [][]string{{"systemctl", "--user", "disable", "--now", "tabbridge-daemon.service"}},
		}, nil
	case "darwin":
		plist := filepath.Join(s.home, "Library", "LaunchAgents", "dev.tabbridge.daemon.plist")
		domain := "gui/" + s.uid
		return service{name: "launchd agent " + plist, files: map[string]string{plist: launchdPlist(s)},
			start: [][]string{{"launchctl", "bootstrap", domain, plist}},
			stop:  [][]string{{"launchctl", "bootout", domain, plist}},
		}, nil
	case "windows":
		create := schtasksCreate(s)
		if tr := create[len(create)-1]; len(tr) > maxTaskRun {
			return service{}, fmt.Errorf("the task's command is %d characters, more than the %d schtasks takes: %s; put tabbridge.exe and the credentials (--credentials) on shorter paths", len(tr), maxTaskRun, tr)
		}
		return service{name: `scheduled task \Tabbridge\Daemon`,
			start: [][]string{create, {"schtasks", "/Run", "/TN", `\Tabbridge\Daemon`}},
			stop:  [][]string{{"schtasks", "/End", "/TN", `\Tabbridge\Daemon`}, {"schtasks", "/Delete", "/TN", `\Tabbridge\Daemon`, "/F"}},
		}, nil
	}
	return service{}, fmt.Errorf("'tabbridge daemon install' does not know how to start a service on %s; run 'tabbridge daemon' from your session's start-up instead", s.goos)
}

// daemonArgv is the command every service runs.
func (s installSpec) daemonArgv() []string {
	return []string{s.exe, "daemon", "--credentials", s.credentials}
}

func systemdUnit(s installSpec) string {
	words := make([]string, 0, 4)
	for _, w := range s.daemonArgv() {
		words = append(words, systemdQuote(w))
	}
	return `[Unit]
Description=Tabbridge terminal daemon (watch and type into this machine's agents from the web app)
Documentation=https://github.com/tabbridge/tabbridge#terminal-daemon
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
# The machine token stays in the credentials file (0600): never here.
ExecStart=` + strings.Join(words, " ") + `
Restart=on-failure
RestartSec=5
# 3: the server refused the token or this install; restarting cannot help.
RestartPreventExitStatus=` + fmt.Sprint(exitRefused) + `

[Install]
WantedBy=default.target
`
}

// systemdQuote quotes a word for a unit's command line when it needs it
// (spaces, quotes, backslashes, '%' and '$' specifiers).
func systemdQuote(w string) string {
	w = strings.ReplaceAll(w, "%", "%%")
	w = strings.ReplaceAll(w, "$", "$$")
	if w != "" && !strings.ContainsAny(w, " \t\"'\\;") {
		return w
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
}

func launchdPlist(s installSpec) string {
	var args strings.Builder
	for _, w := range s.daemonArgv() {
		fmt.Fprintf(&args, "\t\t<string>%s</string>\n", html.EscapeString(w))
	}
	logFile := html.EscapeString(filepath.Join(s.home, "Library", "Logs", "tabbridge-daemon.log"))
	return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- The Tabbridge terminal daemon; its machine token stays in the credentials file. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>dev.tabbridge.daemon</string>
	<key>ProgramArguments</key>
	<array>
` + args.String() + `	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>30</integer>
	<key>StandardOutPath</key>
	<string>` + logFile + `</string>
	<key>StandardErrorPath</key>
	<string>` + logFile + `</string>
</dict>
</plist>
`
}

// maxTaskRun is the longest command schtasks /TR accepts.
const maxTaskRun = 261

// schtasksCreate registers the daemon to start at this user's logon, with
// the user's own rights.
func schtasksCreate(s installSpec) []string {
	var tr []string
	for _, w := range s.daemonArgv() {
		tr = append(tr, `"`+w+`"`)
	}
	return []string{"schtasks", "/Create", "/TN", `\Tabbridge\Daemon`, "/SC", "ONLOGON", "/RL", "LIMITED", "/F", "/TR", strings.Join(tr, " ")}
}

// localSpec is the install spec for this machine and user.
func localSpec(credentials string) (installSpec, error) {
	exe, err := os.Executable()
	if err != nil {
		return installSpec{}, fmt.Errorf("find this program: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return installSpec{}, fmt.Errorf("find this program: %w", err)
	}
	if strings.Contains(exe, "go-build") {
		return installSpec{}, fmt.Errorf("this program is %s, a 'go run' build that is deleted when it exits; install a built tabbridge (go build ./cmd/tabbridge, or a release) and run its 'daemon install'", exe)
	}
	home, _ := os.UserHomeDir()
	config, err := os.UserConfigDir()
	if err != nil {
		return installSpec{}, fmt.Errorf("find the config directory: %w", err)
	}
	if credentials, err = filepath.Abs(credentials); err != nil {
		return installSpec{}, err
	}
	return installSpec{goos: runtime.GOOS, exe: exe, credentials: credentials, home: home, configDir: config, uid: fmt.Sprint(os.Getuid())}, nil
}

// runInstall sets the daemon up to start at every login, reading the
// enrolled credentials: tabbridge daemon install [--credentials path]
// [--no-start].
func runInstall(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("daemon install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	creds := fs.String("credentials", getenv("TABBRIDGE_CREDENTIALS"), "the enrolled credentials; default "+daemon.DefaultCredentialsPath()+" (TABBRIDGE_CREDENTIALS)")
	noStart := fs.Bool("no-start", false, "write the service's files only; do not load or start it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *creds == "" {
		*creds = daemon.DefaultCredentialsPath()
	}
	// A service that would fail at every login is worse than none.
	if _, err := daemon.LoadCredentials(*creds); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	spec, err := localSpec(*creds)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	svc, err := serviceFor(spec)
	if err != nil {
		return err
	}
	for path, body := range svc.files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("install: %w", err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return fmt.Errorf("install: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	if *noStart {
		fmt.Fprintf(stdout, "%s written; not started (--no-start)\n", svc.name)
		return nil
	}
	for i, argv := range svc.start {
		if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
			var rest []string
			for _, a := range svc.start[i:] {
				rest = append(rest, strings.Join(a, " "))
			}
			return fmt.Errorf("install: %s: %v: %s. The %s is written but not started; once that is fixed, run: %s",
				strings.Join(argv, " "), err, strings.TrimSpace(string(out)), svc.name, strings.Join(rest, " && "))
		}
	}
	fmt.Fprintf(stdout, "installed the %s: the daemon runs now and at every login; start agents with 'tabbridge run -- claude'\n", svc.name)
	return nil
}

// runUninstall undoes install: stops the service and removes its files.
func runUninstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("daemon uninstall", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noStop := fs.Bool("no-stop", false, "remove the service's files only; do not unload or stop it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	spec, err := localSpec(daemon.DefaultCredentialsPath())
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	svc, err := serviceFor(spec)
	if err != nil {
		return err
	}
	if !*noStop {
		for _, argv := range svc.stop {
			_ = exec.CommandContext(ctx, argv[0], argv[1:]...).Run() // not installed is fine
		}
	}
	for path := range svc.files {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("uninstall: %w", err)
		}
		fmt.Fprintf(stdout, "removed %s\n", path)
	}
	if !*noStop && spec.goos == "linux" {
		_ = exec.CommandContext(ctx, "systemctl", "--user", "daemon-reload").Run()
	}
	fmt.Fprintf(stdout, "uninstalled the %s; the credentials stay in %s (delete them, and revoke the machine in the web app, to forget this machine)\n", svc.name, daemon.DefaultCredentialsPath())
	return nil
}
