// Command tabbridge runs the Tabbridge server, or a machine's terminal daemon.
//
//	tabbridge [serve] [flags]
//	tabbridge daemon enroll --server URL   (reads the machine token on stdin)
//	tabbridge daemon [-- command [args]]
//
// Every flag has an environment variable (shown in --help and README.md);
// a flag given on the command line wins over the environment.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "tabbridge:", err)
		}
		os.Exit(1)
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
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stderr, ready)
	case "daemon":
		return runDaemon(ctx, args, getenv, stderr)
	case "run":
		return runSession(args, getenv, os.Stdout, stderr)
	case "help":
		fmt.Fprintln(stderr, "usage: tabbridge [serve] [flags]   (tabbridge serve --help lists the flags)")
		fmt.Fprintln(stderr, "       tabbridge daemon enroll --server URL   (paste the machine token when asked)")
		fmt.Fprintln(stderr, "       tabbridge daemon [-- command [args]]")
		fmt.Fprintln(stderr, "       tabbridge run -- command [args]   (starts a session in the running daemon)")
		return nil
	}
	fmt.Fprintf(stderr, "tabbridge: unknown command %q; try 'tabbridge help'\n", cmd)
	return errUsage
}
