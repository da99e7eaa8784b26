// Package testbin builds the Go programs tests run as real processes (the
// tabbridge binary, the relay's test program), each once per test process,
// however many tests ask for it, and collects what a process (or a server's
// logger) writes so a test can wait for a line (Log). It starts nothing
// itself; the tests run what it built.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// build is one program: built on first use, its path or why it failed kept.
type build struct {
	once sync.Once
	path string
	err  error
}

// builds maps a package's absolute directory to its *build.
var builds sync.Map

// Build returns the path of the program built from the Go package in dir
// (a directory, relative to the test's working directory or absolute). The
// first call in the process builds it into a temporary directory; a failed
// build fails every test that asks for it, with go build's output.
func Build(t testing.TB, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := builds.LoadOrStore(abs, &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = goBuild(abs) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func goBuild(dir string) (string, error) {
	tmp, err := os.MkdirTemp("", "tabbridge-testbin-")
	if err != nil {
		return "", fmt.Errorf("build %s: %w", dir, err)
	}
	path := filepath.Join(tmp, filepath.Base(dir))
	if out, err := exec.Command("go", "build", "-o", path, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", dir, err, out)
	}
	return path, nil
}
