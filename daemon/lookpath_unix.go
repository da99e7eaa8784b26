//go:build !windows

package daemon

import (
	"os"
	"path/filepath"
)

// pathSeparators mark a command name as a path, not looked up in PATH.
const pathSeparators = "/"

// executableIn finds name in dir: a regular file someone may execute.
func executableIn(dir, name string, _ []string) (string, bool) {
	p := filepath.Join(dir, name)
	info, err := os.Stat(p)
	return p, err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}

// sameEnvKey compares environment variable names: case matters on Unix.
func sameEnvKey(a, b string) bool { return a == b }
