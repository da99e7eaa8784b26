//go:build !windows

package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tabbridge/tabbridge/daemon"
)

// TestCredentialsStayPrivate: saved credentials are 0600 in a 0700
// directory and read back; a file others may read, a missing one and a
// token with spaces are refused, each saying what to do.
func TestCredentialsStayPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", "tabbridge", "daemon.json")
	c := daemon.Credentials{Server: "https://tb.example.com", Token: "tbm_abc", Install: daemon.NewInstallID()}
	if err := daemon.SaveCredentials(path, c); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", info.Mode().Perm())
	}
	if info, _ := os.Stat(filepath.Dir(path)); info.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v", info.Mode().Perm())
	}
	if got, err := daemon.LoadCredentials(path); err != nil || got != c {
		t.Fatalf("read back %+v, %v", got, err)
	}
	os.Chmod(path, 0o640)
	if _, err := daemon.LoadCredentials(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a group-readable file: %v", err)
	}
	if _, err := daemon.LoadCredentials(path + ".missing"); err == nil || !strings.Contains(err.Error(), "tabbridge daemon enroll") {
		t.Errorf("a missing file: %v", err)
	}
	c.Token = "tbm_a b"
	if err := daemon.SaveCredentials(path, c); err == nil || !strings.Contains(err.Error(), "spaces") {
		t.Errorf("a token with a space: %v", err)
	}
	if a, b := daemon.NewInstallID(), daemon.NewInstallID(); a == b || len(a) != 32 {
		t.Errorf("install ids %q %q", a, b)
	}
}
