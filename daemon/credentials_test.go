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

// TestCredentialsFileIsReadOneWay: a credentials file with a field enroll
// does not write, a second value, or a token no Authorization header can
// carry (the daemon then failed every dial with an error about headers) is
// refused, saying to enroll again.
func TestCredentialsFileIsReadOneWay(t *testing.T) {
	dir := t.TempDir()
	install := daemon.NewInstallID()
	for name, body := range map[string]string{
		"unknown field": `{"server":"https://tb.example","token":"tbm_a","install":"` + install + `","tokn":"tbm_b"}`,
		"two values":    `{"server":"https://tb.example","token":"tbm_a","install":"` + install + `"} {"token":"tbm_b"}`,
		"control byte":  `{"server":"https://tb.example","token":"tbm_a\u0001b","install":"` + install + `"}`,
		"not ASCII":     `{"server":"https://tb.example","token":"tbm_é","install":"` + install + `"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if c, err := daemon.LoadCredentials(path); err == nil || !strings.Contains(err.Error(), "enroll again") {
			t.Errorf("%s: LoadCredentials = %+v, %v; want it refused, saying to enroll again", name, c, err)
		}
	}
}
