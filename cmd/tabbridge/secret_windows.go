package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/charmbracelet/x/term"
)

// readSecret reads one line from the console f without echoing it, after
// prompt. (The console turns echo off as ReadPassword starts, just after
// the prompt; Unix does it before, see secret_unix.go.)
func readSecret(f *os.File, prompt func()) (string, error) {
	prompt()
	b, err := term.ReadPassword(f.Fd())
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
