//go:build !windows

package terminal

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/charmbracelet/x/termios"
	"github.com/charmbracelet/x/xpty"
	"golang.org/x/sys/unix"
)

// proc is a program in a Unix PTY (see pty.go).
type proc struct {
	cmd  *exec.Cmd // static; Wait is called once, by Session's reader
	ptmx *os.File  // static, non-blocking on Go's poller
	once sync.Once
}

// startProc runs the program in a new PTY as the leader of a new session
// (its own process group, the PTY its controlling terminal).
func startProc(o Options) (*proc, error) {
	pt, err := xpty.NewUnixPty(o.Cols, o.Rows)
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := pt.Start(cmd); err != nil {
		_ = pt.Close()
		return nil, err
	}
	// Only the child holds the terminal side from now on, so that its
	// exit (and its children's) ends the master's reads with EIO.
	_ = pt.Slave().Close()
	ptmx, err := pollable(pt.Master())
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, err
	}
	return &proc{cmd: cmd, ptmx: ptmx}, nil
}

// pollable turns a PTY master into a non-blocking file on Go's poller, so
// that Close ends a read or write waiting on it: a blocking write to a
// program that does not read its input stays blocked even after the program
// has died (creack/pty's files block, and Close does not end their reads).
// Fd must not be called on the result (it makes the file blocking again).
// f is closed.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("dup pty: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("pty non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func (p *proc) Read(b []byte) (int, error)  { return p.ptmx.Read(b) }
func (p *proc) Write(b []byte) (int, error) { return p.ptmx.Write(b) }

// Resize sets the PTY's size through the file's own reference to its fd:
// never on a closed (and perhaps reused) fd number. The program gets
// SIGWINCH.
func (p *proc) Resize(cols, rows int) error {
	rc, err := p.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = termios.SetWinsize(int(fd), &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	return errors.Join(err, serr)
}

// Kill signals the whole process group. The caller makes sure the child is
// not reaped yet: its pid, and so the group id, may then be someone else's.
func (p *proc) Kill() error {
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group: %w", err)
	}
	return nil
}

func (p *proc) Wait() error   { return p.cmd.Wait() }
func (p *proc) ExitCode() int { return p.cmd.ProcessState.ExitCode() }
func (p *proc) Pid() int      { return p.cmd.Process.Pid }

// Close closes the master, ending a read or write waiting on it.
func (p *proc) Close() error {
	err := os.ErrClosed
	p.once.Do(func() { err = p.ptmx.Close() })
	return err
}
