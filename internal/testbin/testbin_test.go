package testbin

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBuildOncePerProcess: the program is built once, however often it is
// asked for, and what is returned runs.
func TestBuildOncePerProcess(t *testing.T) {
	path := Build(t, "testdata/hello")
	if again := Build(t, "./testdata/hello/"); again != path {
		t.Fatalf("built twice: %s and %s", path, again)
	}
	out, err := exec.Command(path).Output()
	if err != nil || !strings.Contains(string(out), "hello from a built program") {
		t.Fatalf("the built program: %q %v", out, err)
	}
}

// TestLogWaitFor: a waiter wakes on the write that completes what it waits
// for, however the writes split it.
func TestLogWaitFor(t *testing.T) {
	l := NewLog()
	go func() {
		l.Write([]byte("linked to "))
		l.Write([]byte("server\n"))
	}()
	l.WaitFor(t, "linked to server", nil, 10*time.Second)
	exited := make(chan struct{})
	close(exited)
	l.WaitFor(t, "linked", exited, 10*time.Second) // already there: an ended process is no failure
}
