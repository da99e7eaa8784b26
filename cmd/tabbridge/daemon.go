package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
)

// runDaemon runs the terminal daemon: tabbridge daemon [-- command [args]],
// with the server and machine token that `tabbridge daemon enroll` saved
// (or TABBRIDGE_MACHINE_TOKEN). With a command it starts that session at
// once; the daemon runs until it is interrupted, then stops every session.
// `tabbridge daemon enroll|install|uninstall` are its set-up steps.
func runDaemon(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "enroll":
			return runEnroll(ctx, args[1:], getenv, stdin, stderr)
		case "install":
			return runInstall(ctx, args[1:], getenv, os.Stdout, stderr)
		case "uninstall":
			return runUninstall(ctx, args[1:], os.Stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", getenv("TABBRIDGE_SERVER"), "the server's public URL; default the one enrolled (TABBRIDGE_SERVER)")
	creds := fs.String("credentials", getenv("TABBRIDGE_CREDENTIALS"), "the file 'tabbridge daemon enroll' wrote; default "+daemon.DefaultCredentialsPath()+" (TABBRIDGE_CREDENTIALS)")
	token := fs.String("token", "", "refused: a token on a command line is readable by every user of this machine; enroll instead")
	control := fs.String("control", getenv("TABBRIDGE_CONTROL"), "unix socket where 'tabbridge run' starts sessions; default "+daemon.DefaultControlPath()+" (TABBRIDGE_CONTROL)")
	cols := fs.Int("cols", 120, "initial width of a session started here")
	rows := fs.Int("rows", 40, "initial height of a session started here")
	logLevel := fs.String("log-level", cmp.Or(getenv("TABBRIDGE_LOG_LEVEL"), "info"), "debug, info, warn or error (TABBRIDGE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *token != "" {
		return errTokenFlag
	}
	c, err := daemonCredentials(*server, *creds, getenv)
	if err != nil {
		return err
	}
	log, err := newLogger(*logLevel, stderr)
	if err != nil {
		return err
	}
	d, err := daemon.New(daemon.Options{Server: c.Server, Token: c.Token, InstallID: c.Install, Logger: log})
	if err != nil {
		return err
	}
	// The control socket first: a daemon that cannot listen (another one
	// already does) must fail before it starts a command it would leave
	// running.
	if *control == "" {
		*control = daemon.DefaultControlPath()
	}
	ln, err := daemon.ListenControl(*control)
	if err != nil {
		return err
	}
	if argv := fs.Args(); len(argv) > 0 {
		dir, _ := os.Getwd()
		id, err := d.Start(daemon.Spec{Argv: argv, Dir: dir, Env: os.Environ(), Cols: *cols, Rows: *rows})
		if err != nil {
			ln.Close()
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d.Close(stopCtx)
			return err
		}
		log.Info("session started", "id", id, "command", argv)
	}
	// The control socket closes when the daemon stops for any reason: on a
	// signal, and also when the server refuses the token, which must end
	// the daemon rather than leave it listening with no link.
	controlCtx, stopControl := context.WithCancel(ctx)
	defer stopControl()
	controlDone := make(chan error, 1)
	go func() { controlDone <- d.ServeControl(controlCtx, ln) }()
	log.Info("daemon ready: start sessions with 'tabbridge run -- <command>'", "control", *control)
	// The link outlives the signal: sessions are stopped first, while it is
	// up, so that the server hears they exited instead of listing them as
	// running.
	linkCtx, stopLink := context.WithCancel(context.Background())
	defer stopLink()
	served := make(chan error, 1)
	go func() { served <- d.Serve(linkCtx) }()
	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	}
	stopControl()
	<-controlDone
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.StopSessions(stopCtx); err != nil {
		log.Warn("stop sessions", "err", err)
	}
	stopLink()
	if serveErr == nil {
		serveErr = <-served
	}
	if err := d.Close(stopCtx); err != nil {
		log.Warn("close the daemon", "err", err)
	}
	if errors.Is(serveErr, daemon.ErrRefused) {
		return fmt.Errorf("%w: create a new machine in the web app and enroll with its token ('tabbridge daemon enroll')", serveErr)
	}
	if errors.Is(serveErr, daemon.ErrOtherInstall) {
		return fmt.Errorf("%w: the daemon enrolled elsewhere with this token linked first, so the server refuses this one (the machine's page says so). "+
			"Create a new machine in the web app for this computer and enroll with its token", serveErr)
	}
	return nil
}

// runSession asks the local daemon to start a session:
// tabbridge run [--control path] -- command [args]. The session runs in the
// daemon's PTY, in this directory and environment, and is watched and typed
// into from the web app.
func runSession(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	control := fs.String("control", getenv("TABBRIDGE_CONTROL"), "the daemon's control socket (TABBRIDGE_CONTROL)")
	cols := fs.Int("cols", 120, "initial width")
	rows := fs.Int("rows", 40, "initial height")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: tabbridge run [--control path] -- <command> [args]")
		return errUsage
	}
	if *control == "" {
		*control = daemon.DefaultControlPath()
	}
	dir, _ := os.Getwd()
	id, err := daemon.RequestStart(*control, daemon.StartRequest{Argv: fs.Args(), Dir: dir, Env: os.Environ(), Cols: *cols, Rows: *rows})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "session %s started; open it from Machines in the Tabbridge web app\n", id)
	return nil
}
