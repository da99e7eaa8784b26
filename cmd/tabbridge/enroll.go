package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/tabbridge/tabbridge/daemon"
)

// stdin is where enroll reads the token; tests replace it.
var stdin io.Reader = os.Stdin

// errTokenFlag answers --token, which earlier versions took.
var errTokenFlag = errors.New("--token is refused: a token on a command line is readable by every user of this machine " +
	"(ps, /proc/<pid>/cmdline) and kept in shell history. Run 'tabbridge daemon enroll --server URL' once and paste the token " +
	"when it asks (it is saved in a file only you can read), or set TABBRIDGE_MACHINE_TOKEN and TABBRIDGE_INSTALL_ID")

// daemonCredentials finds the daemon's server, token and install id: from
// TABBRIDGE_MACHINE_TOKEN (with TABBRIDGE_INSTALL_ID and the server) when it
// is set, else from the enrolled credentials file; server, when set, wins
// over the file's.
func daemonCredentials(server, path string, getenv func(string) string) (daemon.Credentials, error) {
	if tok := getenv("TABBRIDGE_MACHINE_TOKEN"); tok != "" {
		c := daemon.Credentials{Server: server, Token: tok, Install: getenv("TABBRIDGE_INSTALL_ID")}
		switch {
		case server == "":
			return c, errors.New("--server (or TABBRIDGE_SERVER) is required with TABBRIDGE_MACHINE_TOKEN: the Tabbridge server's public URL, as shown with the machine's token in the web app")
		case c.Install == "":
			return c, errors.New("TABBRIDGE_MACHINE_TOKEN needs TABBRIDGE_INSTALL_ID too: a random id that stays the same for this install " +
				"across restarts (e.g. from 'openssl rand -hex 16'); the server admits only the install that linked first with the token")
		}
		if err := c.Check(); err != nil {
			return c, fmt.Errorf("TABBRIDGE_MACHINE_TOKEN / TABBRIDGE_INSTALL_ID: %w", err)
		}
		return c, nil
	}
	if path == "" {
		path = daemon.DefaultCredentialsPath()
	}
	c, err := daemon.LoadCredentials(path)
	if err != nil {
		return c, err
	}
	if server != "" {
		c.Server = server
	}
	return c, c.Check()
}

// runEnroll saves the machine token, read from standard input, with the
// server and a new install id in the credentials file:
// tabbridge daemon enroll --server URL [--credentials path] < token.
func runEnroll(ctx context.Context, args []string, getenv func(string) string, in io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("daemon enroll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", getenv("TABBRIDGE_SERVER"), "the server's public URL, as the web app shows it (TABBRIDGE_SERVER)")
	path := fs.String("credentials", getenv("TABBRIDGE_CREDENTIALS"), "where to save the token; default "+daemon.DefaultCredentialsPath()+" (TABBRIDGE_CREDENTIALS)")
	token := fs.String("token", "", "refused: paste the token on standard input instead")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	switch {
	case *token != "":
		return errTokenFlag
	case *server == "":
		return errors.New("--server is required: the Tabbridge server's public URL, as shown with the machine's token in the web app")
	case fs.NArg() > 0:
		return fmt.Errorf("enroll takes no arguments (got %q): it reads the token from standard input", fs.Args())
	}
	if *path == "" {
		*path = daemon.DefaultCredentialsPath()
	}
	tok, err := readToken(in, stderr)
	if err != nil {
		return err
	}
	c := daemon.Credentials{Server: strings.TrimRight(*server, "/"), Token: tok, Install: daemon.NewInstallID()}
	if old, err := daemon.LoadCredentials(*path); err == nil {
		c.Install = old.Install // the install stays the same install
	}
	if err := c.Check(); err != nil {
		return err
	}
	if err := checkToken(ctx, c, stderr); err != nil {
		return err
	}
	if err := daemon.SaveCredentials(*path, c); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Enrolled: the token is saved in %s, which only you can read.\n"+
		"Start the daemon at every login:  tabbridge daemon install\n"+
		"or now, in this terminal:         tabbridge daemon -- claude\n", *path)
	return nil
}

// readToken reads one line from in: without echo, after a prompt, when in
// is a terminal.
func readToken(in io.Reader, stderr io.Writer) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(f.Fd()) {
		tok, err := readSecret(f, func() { fmt.Fprint(stderr, "Paste the machine token (tbm_…) and press Enter: ") })
		fmt.Fprintln(stderr)
		if err == nil && tok == "" {
			err = errors.New("no token was pasted: copy it from the web app's page for the new machine")
		}
		return tok, err
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read token: %w", err)
	}
	if tok := strings.TrimSpace(line); tok != "" {
		return tok, nil
	}
	return "", errors.New("no token on standard input: paste the machine token (tbm_…) from the web app, e.g. 'tabbridge daemon enroll --server URL < token-file'")
}

// checkToken asks the server whether it knows the token, without linking
// (a plain GET of the daemon socket: 426 for a live token, 401 for an
// unknown one), so a mistyped token is caught now rather than at start.
// A server that cannot be reached is not an error: the file is still saved.
func checkToken(ctx context.Context, c daemon.Credentials, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+"/ws/daemon", nil)
	if err != nil {
		return fmt.Errorf("server %q: %w", c.Server, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "Could not reach %s to check the token (%v); saving it anyway.\n", c.Server, err)
		return nil
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return errors.New("the server does not know this machine token (mistyped, or the machine was revoked); nothing was saved: copy it again from the web app")
	case http.StatusNotFound:
		return fmt.Errorf("%s answered 404 for /ws/daemon: is --server the Tabbridge server's public URL? Nothing was saved", c.Server)
	}
	return nil
}
