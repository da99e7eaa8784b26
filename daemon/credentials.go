package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tabbridge/tabbridge/relay/wire"
)

// Credentials are what `tabbridge daemon enroll` saves for the daemon: the
// server, the machine token and this install's id. They live in a file
// only this user can read, because a token on a command line is readable by
// every local user (/proc/<pid>/cmdline, ps); the daemon, its service unit
// and `tabbridge daemon install` read them from there.
type Credentials struct {
	Server string `json:"server"`
	Token  string `json:"token"`
	// Install is random, written once per install: the server binds the
	// machine to the first install that links, so a copied token alone
	// cannot take over the person's terminals.
	Install string `json:"install"`
}

// ErrNoCredentials is returned by LoadCredentials when the file is missing.
var ErrNoCredentials = errors.New("daemon: not enrolled")

// DefaultCredentialsPath is the per-user config file the daemon reads its
// token from: $XDG_CONFIG_HOME/tabbridge/daemon.json on Linux, the
// Application Support folder on macOS, %AppData% on Windows (whose profile
// folder only its user can read).
func DefaultCredentialsPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "tabbridge", "daemon.json")
}

// NewInstallID returns a fresh random install id.
func NewInstallID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Check reports what is wrong with c, phrased for the person enrolling.
func (c Credentials) Check() error {
	switch {
	case !strings.HasPrefix(c.Token, tokenPrefix):
		return fmt.Errorf("the machine token must start with %s; copy it from the page shown when the machine was created in the web app", tokenPrefix)
	case strings.ContainsAny(c.Token, " \t\r\n"):
		return errors.New("the machine token has spaces in it; paste it exactly as the web app shows it")
	case strings.ContainsFunc(c.Token, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		// it goes in an Authorization header, which takes no such character
		return errors.New("the machine token has a character that is not printable ASCII in it; paste it exactly as the web app shows it")
	case !wire.ValidInstallID(c.Install):
		return fmt.Errorf("the install id must be %d to %d printable characters", wire.MinInstallID, wire.MaxInstallID)
	}
	if _, err := wsURL(c.Server); err != nil {
		return err
	}
	return nil
}

// SaveCredentials writes c to path, readable and writable only by this user
// (0600 in a 0700 directory it creates), replacing any earlier file whole.
func SaveCredentials(path string, c Credentials) error {
	if err := c.Check(); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	tmp, err := os.CreateTemp(dir, ".daemon-*.json")
	if err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600 before anything is written into it.
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	return nil
}

// LoadCredentials reads the file SaveCredentials wrote. On Unix it refuses
// a file another user could read or that belongs to someone else, as ssh
// does with a private key: the token in it would already have leaked.
func LoadCredentials(path string) (Credentials, error) {
	var c Credentials
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, fmt.Errorf("%w: %s does not exist; run 'tabbridge daemon enroll --server URL' and paste the machine token from the web app", ErrNoCredentials, path)
	}
	if err != nil {
		return c, fmt.Errorf("read credentials: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return c, fmt.Errorf("read credentials: %w", err)
	}
	if err := privateFile(path, info); err != nil {
		return c, err
	}
	if c, err = decodeCredentials(f); err != nil {
		return c, fmt.Errorf("credentials %s: %w; enroll again", path, err)
	}
	return c, nil
}

// maxCredentials bounds the file: a server address, a token and an id.
const maxCredentials = 64 << 10

// decodeCredentials reads what SaveCredentials writes: one JSON object of
// Credentials' fields, that Check takes.
func decodeCredentials(r io.Reader) (Credentials, error) {
	var c Credentials
	b, err := io.ReadAll(io.LimitReader(r, maxCredentials+1))
	if err != nil {
		return c, fmt.Errorf("read: %w", err)
	}
	if len(b) > maxCredentials {
		return c, fmt.Errorf("the file is over %d bytes, not what enroll writes", maxCredentials)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Credentials{}, fmt.Errorf("not the JSON enroll writes (%v)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Credentials{}, errors.New("more than one JSON value, not what enroll writes")
	}
	if err := c.Check(); err != nil {
		return Credentials{}, err
	}
	return c, nil
}
