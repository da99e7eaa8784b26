//go:build !windows

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/termios"
	"golang.org/x/sys/unix"
)

// readSecret reads one line from the terminal f without echoing it. Echo is
// turned off before prompt runs, so not even a paste that races the prompt
// reaches the screen (and its scrollback); it is restored afterwards.
func readSecret(f *os.File, prompt func()) (string, error) {
	fd := int(f.Fd())
	old, err := termios.GetTermios(fd)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	// Only these four flags change; restoring them restores the terminal.
	set := func(echo, icanon, isig, icrnl bool) error {
		return termios.SetTermios(fd, uint32(old.Ispeed), uint32(old.Ospeed), nil,
			map[termios.I]bool{termios.ICRNL: icrnl}, nil, nil,
			map[termios.L]bool{termios.ECHO: echo, termios.ICANON: icanon, termios.ISIG: isig})
	}
	if err := set(false, true, true, true); err != nil {
		return "", fmt.Errorf("read token: turn echo off: %w", err)
	}
	defer func() {
		_ = set(old.Lflag&unix.ECHO != 0, old.Lflag&unix.ICANON != 0, old.Lflag&unix.ISIG != 0, old.Iflag&unix.ICRNL != 0)
	}()
	prompt()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(line), nil
}
