package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/tabbridge/tabbridge/daemon"
)

// runDaemon runs the terminal daemon: tabbridge daemon --server URL --token
// tbm_… [-- command [args]]. With a command it starts that session at once;
// the daemon runs until it is interrupted, then stops every session.
func runDaemon(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", getenv("TABBRIDGE_SERVER"), "the server's public URL (TABBRIDGE_SERVER)")
	token := fs.String("token", getenv("TABBRIDGE_MACHINE_TOKEN"), "machine token from the web app, tbm_… (TABBRIDGE_MACHINE_TOKEN)")
	cols := fs.Int("cols", 120, "initial width of a session started here")
	rows := fs.Int("rows", 40, "initial height of a session started here")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	d, err := daemon.New(daemon.Options{Server: *server, Token: *token, Logger: log})
	if err != nil {
		return err
	}
	if argv := fs.Args(); len(argv) > 0 {
		dir, _ := os.Getwd()
		id, err := d.Start(daemon.Spec{Argv: argv, Dir: dir, Env: os.Environ(), Cols: *cols, Rows: *rows})
		if err != nil {
			return err
		}
		log.Info("session started", "id", id, "command", argv)
	}
	serveErr := d.Serve(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(stopCtx); err != nil {
		log.Warn("stop sessions", "err", err)
	}
	if errors.Is(serveErr, daemon.ErrRefused) {
		return fmt.Errorf("%w: create a new machine token in the web app and start the daemon with it", serveErr)
	}
	return nil
}
