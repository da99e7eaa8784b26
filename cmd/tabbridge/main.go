// Command tabbridge runs the Tabbridge server, or a machine's terminal
// daemon; 'tabbridge help' lists every command (see commands).
//
// Every setting of the server and the daemon has an environment variable
// (shown in --help and README.md), but the size of a session started from
// the command line (--cols, --rows); a flag given on the command line wins
// over the environment.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/tabbridge/tabbridge/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "tabbridge:", err)
		}
		if errors.Is(err, daemon.ErrRefused) || errors.Is(err, daemon.ErrOtherInstall) {
			os.Exit(exitRefused) // a service manager must not restart it
		}
		os.Exit(1)
	}
}

// version is the release, set by scripts/release with
// -ldflags "-X main.version=…"; a build from source says "dev".
var version = "dev"

// commands lists every command with one line each, for 'tabbridge help'.
var commands = [][2]string{
	{"serve", "run the server: web app, MCP endpoint, extension and daemon sockets (the default; 'tabbridge serve --help' lists its flags)"},
	{"daemon", "run this machine's terminal daemon, linked to the server: tabbridge daemon [-- command [args]]"},
	{"daemon enroll", "save this machine's token, pasted on standard input, for the daemon: tabbridge daemon enroll --server URL"},
	{"daemon install", "start the daemon now and at every login (systemd user unit, launchd agent, or scheduled task)"},
	{"daemon uninstall", "stop starting the daemon at login and remove what install wrote"},
	{"run", "start a session in the running daemon, here, with this environment: tabbridge run -- command [args]"},
	{"version", "print this build's version"},
	{"help", "list the commands"},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tabbridge <command> [flags]   ('tabbridge <command> --help' lists a command's flags)")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-17s %s\n", c[0], c[1])
	}
}

var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help shown")
)

// run dispatches a subcommand. ready, when not nil, receives the listening
// address once the server accepts connections (tests use it).
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	cmd := "serve"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "-help" || a == "--help":
			cmd, args = "help", args[1:]
		case a != "" && a[0] != '-':
			cmd, args = a, args[1:]
		}
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stderr, ready)
	case "daemon":
		return runDaemon(ctx, args, getenv, stderr)
	case "run":
		return runSession(args, getenv, os.Stdout, stderr)
	case "version":
		fmt.Fprintf(os.Stdout, "tabbridge %s %s/%s\n", version, runtime.GOOS, runtime.GOARCH)
		return nil
	case "help":
		usage(os.Stdout)
		return nil
	}
	fmt.Fprintf(stderr, "tabbridge: unknown command %q\n\n", cmd)
	usage(stderr)
	return errUsage
}
