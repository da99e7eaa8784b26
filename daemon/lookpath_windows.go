package daemon

import (
	"os"
	"path/filepath"
	"strings"
)

// pathSeparators mark a command name as a path, not looked up in PATH.
const pathSeparators = `/\:`

// executableIn finds name in dir as Windows would: the name itself when it
// has an extension of PATHEXT, else the name with each PATHEXT extension in
// turn (the session environment's PATHEXT, else .COM;.EXE;.BAT;.CMD).
func executableIn(dir, name string, env []string) (string, bool) {
	exts := ".COM;.EXE;.BAT;.CMD"
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && sameEnvKey(k, "PATHEXT") && v != "" {
			exts = v
		}
	}
	candidates := []string{}
	for _, ext := range filepath.SplitList(exts) {
		if ext != "" && strings.EqualFold(filepath.Ext(name), ext) {
			candidates = []string{name}
			break
		}
		if ext != "" {
			candidates = append(candidates, name+ext)
		}
	}
	for _, c := range candidates {
		p := filepath.Join(dir, c)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// sameEnvKey compares environment variable names: Windows ignores case
// (PATH is often spelled Path).
func sameEnvKey(a, b string) bool { return strings.EqualFold(a, b) }
