package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// Options describe a session; Start fills defaults.
type Options struct {
	Path string   // program; looked up in PATH when it has no slash
	Args []string // arguments after the program name
	Dir  string
	Env  []string // the whole environment; nil means the daemon's own
	// Cols and Rows are the initial size; default 80×24.
	Cols, Rows int
	// Output receives every output byte in ordered batches, from one
	// goroutine, after the emulator has taken them. It must not block long:
	// while it runs the PTY is not read.
	Output func(Batch)
	// Window and Clock configure output coalescing (see CoalescerOptions).
	Window time.Duration
	Clock  Clock
}

// Session is one program in a PTY, its emulator and its output batches.
//
// Goroutines: the reader (PTY → coalescer; on EOF or EIO it flushes, reaps
// the child and closes Done), the coalescer's (batches → emulator →
// Output), the input writer, and the emulator's own. Stop waits for all.
type Session struct {
	cmd  *exec.Cmd // static after Start; Wait is called by the reader only
	ptmx *os.File  // static; closed by Stop
	emu  *Emulator // static
	coal *Coalescer
	out  func(Batch) // static

	input    chan []byte   // to the input writer
	stopping chan struct{} // closed by Stop
	done     chan struct{} // closed when every byte is delivered and the child reaped
	wg       sync.WaitGroup
	stopOnce sync.Once
	exitErr  error // written by the reader before done closes
}

// Start runs the program in a new PTY, in its own session and process group.
func Start(o Options) (*Session, error) {
	if o.Cols <= 0 || o.Rows <= 0 {
		o.Cols, o.Rows = 80, 24
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	ws := &pty.Winsize{Cols: uint16(o.Cols), Rows: uint16(o.Rows)}
	ptmx, err := pty.StartWithAttrs(cmd, ws, &syscall.SysProcAttr{Setsid: true, Setctty: true})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Path, err)
	}
	s := &Session{
		cmd: cmd, ptmx: ptmx, emu: NewEmulator(o.Cols, o.Rows), out: o.Output,
		input: make(chan []byte, 64), stopping: make(chan struct{}), done: make(chan struct{}),
	}
	s.coal = NewCoalescer(CoalescerOptions{Window: o.Window, Clock: o.Clock, Emit: s.deliver})
	s.wg.Add(2)
	go s.read()
	go s.writeInput()
	return s, nil
}

// deliver feeds a batch to the emulator, then to the caller, so a snapshot
// never describes bytes the caller has not been given an offset for.
func (s *Session) deliver(b Batch) {
	_, _ = s.emu.Write(b.Data)
	if s.out != nil {
		s.out(b)
	}
}

// read is the only reader of the PTY. Reads block and no deadline or Close
// unblocks them; EIO means every slave fd is closed, and only then has every
// byte the program wrote been read.
func (s *Session) read() {
	defer s.wg.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := s.ptmx.Read(buf)
		if n > 0 {
			_, _ = s.coal.Write(buf[:n])
		}
		if err != nil {
			break
		}
	}
	_ = s.coal.Close()
	s.exitErr = s.cmd.Wait()
	close(s.done)
}

// writeInput writes each input exactly as given, in order, never merged.
func (s *Session) writeInput() {
	defer s.wg.Done()
	for {
		select {
		case p := <-s.input:
			_, _ = s.ptmx.Write(p)
		case <-s.stopping:
			return
		}
	}
}

// Input queues keystrokes for the program. It blocks while 64 inputs are
// queued, and fails once the session is stopped.
func (s *Session) Input(p []byte) error {
	select {
	case <-s.stopping:
		return ErrClosed
	default:
	}
	select {
	case s.input <- append([]byte(nil), p...):
		return nil
	case <-s.stopping:
		return ErrClosed
	}
}

// Resize changes the PTY's size (the program gets SIGWINCH) and the
// emulator's.
func (s *Session) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 {
		return fmt.Errorf("resize to %dx%d: size must be positive", cols, rows)
	}
	if err := pty.Setsize(s.ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return fmt.Errorf("resize pty: %w", err)
	}
	return s.emu.Resize(cols, rows)
}

// Snapshot returns history and redraw at a batch boundary (see Batch.Offset).
func (s *Session) Snapshot() (Snapshot, error) { return s.emu.Snapshot() }

// Replies carries the emulator's answers to terminal queries.
func (s *Session) Replies() <-chan []byte { return s.emu.Replies() }

// Pid is the program's process id, also its process group id.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// Done is closed once the program has exited and all of its output has been
// delivered.
func (s *Session) Done() <-chan struct{} { return s.done }

// ExitCode is the program's exit status after Done: its code, or -1 when a
// signal ended it.
func (s *Session) ExitCode() int {
	<-s.done
	return s.cmd.ProcessState.ExitCode()
}

// Stop kills the program's process group, waits for the remaining output to
// be delivered and for every goroutine, then releases the PTY and emulator.
// A process that left the group and keeps the terminal open keeps the read
// blocked: Stop then gives up when ctx ends, leaving the reader behind.
func (s *Session) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() { err = s.stop(ctx) })
	return err
}

func (s *Session) stop(ctx context.Context) error {
	close(s.stopping)
	if err := s.kill(); err != nil {
		return err
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		_ = s.ptmx.Close()
		return fmt.Errorf("stop session: %w", ctx.Err())
	}
	s.wg.Wait()
	_ = s.emu.Close()
	if err := s.ptmx.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close pty: %w", err)
	}
	return nil
}

// kill signals the whole process group, unless the child is already reaped
// (its pid, and so the group id, may then belong to someone else).
func (s *Session) kill() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group: %w", err)
	}
	return nil
}

var _ io.Writer = (*Coalescer)(nil)
