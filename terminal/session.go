package terminal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
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
	// goroutine, as soon as the emulator has them queued (it may take them
	// later: see MaxLag). It must not block long: while it runs the PTY is
	// not read.
	Output func(Batch)
	// Window and Clock configure output coalescing (see CoalescerOptions).
	Window time.Duration
	Clock  Clock
	// InputQueue bounds the input bytes waiting for the program to read
	// them; past it Input refuses more. Default DefaultInputQueue.
	InputQueue int
}

// DefaultInputQueue is the input a session holds for a program that is not
// reading it: a large paste fits, and it is at least the largest input
// frame the daemon accepts, so one input always fits an empty queue.
const DefaultInputQueue = 1 << 20

// ErrInputFull is returned by Input when the program has not read the
// input already queued for it and the new input would exceed InputQueue.
var ErrInputFull = errors.New("terminal: input queue full")

// Session is one program in a PTY, its emulator and its output batches.
//
// Goroutines: the reader (PTY → coalescer; on EOF or EIO it flushes, reaps
// the child, closes Done and then the PTY), the coalescer's (batches →
// emulator queue → Output), the input writer and the query answerer (end
// with Done or Stop), and the emulator's own (end with Stop). Once the program has exited, only the
// emulator remains, so its last screen can still be read. Stop waits for
// all and releases the emulator.
type Session struct {
	pty  *proc     // static; Wait is called by the reader only; closed by the reader at the end of output, or by Stop
	emu  *Emulator // static
	coal *Coalescer
	out  func(Batch) // static

	inMu     sync.Mutex    // guards inQueue and inBytes
	inQueue  [][]byte      // inputs not yet written, oldest first, never merged
	inBytes  int           // bytes in inQueue and the input being written
	inMax    int           // static
	inWake   chan struct{} // capacity 1: the input writer has work
	stopping chan struct{} // closed by Stop
	done     chan struct{} // closed when every byte is delivered and the child reaped
	wg       sync.WaitGroup
	stopOnce sync.Once
	exitErr  error // written by the reader before done closes
}

// Start runs the program in a new PTY: in its own session and process group
// on Unix, in a job object under ConPTY on Windows (see pty.go).
func Start(o Options) (*Session, error) {
	if o.Cols <= 0 || o.Rows <= 0 {
		o.Cols, o.Rows = 80, 24
	}
	if o.InputQueue <= 0 {
		o.InputQueue = DefaultInputQueue
	}
	pty, err := startProc(o)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Path, err)
	}
	s := &Session{
		pty: pty, emu: NewEmulator(o.Cols, o.Rows), out: o.Output,
		inMax: o.InputQueue, inWake: make(chan struct{}, 1), stopping: make(chan struct{}), done: make(chan struct{}),
	}
	s.coal = NewCoalescer(CoalescerOptions{Window: o.Window, Clock: o.Clock, Emit: s.deliver})
	s.wg.Add(3)
	go s.read()
	go s.writeInput()
	go s.answer()
	return s, nil
}

// deliver queues a batch for the emulator, then hands it to the caller at
// once: the PTY is read at its own speed while the emulator catches up
// (at most MaxLag behind). A snapshot covers everything queued, so it never
// describes bytes the caller has not been given an offset for.
func (s *Session) deliver(b Batch) {
	_ = s.emu.feed(b.Data) // the coalescer never writes to an emitted batch again
	if s.out != nil {
		s.out(b)
	}
}

// read is the only reader of the PTY. Its error (EIO on Unix: every slave
// fd is closed) means every byte the program wrote has been read. No one is left
// to read input or be resized then, so the PTY is closed at once, which also
// ends a write waiting for the program to read.
func (s *Session) read() {
	defer s.wg.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := s.pty.Read(buf)
		if n > 0 {
			_, _ = s.coal.Write(buf[:n])
		}
		if err != nil {
			break
		}
	}
	_ = s.coal.Close()
	s.exitErr = s.pty.Wait()
	close(s.done)
	_ = s.pty.Close()
}

// answer writes the emulator's replies to terminal queries (device
// attributes, cursor position, ...) to the program: the daemon is the
// terminal of record, so a query is answered exactly once, watched or not.
// Viewers' own terminals are silenced (server/web/static/terminal.js).
func (s *Session) answer() {
	defer s.wg.Done()
	for {
		select {
		case r, ok := <-s.emu.Replies():
			if !ok {
				return
			}
			_ = s.Input(r)
		case <-s.stopping:
			return
		case <-s.done:
			return
		}
	}
}

// writeInput writes each input exactly as given, in order, never merged.
// A write waits while the program does not read; closing the PTY ends it.
func (s *Session) writeInput() {
	defer s.wg.Done()
	for {
		select {
		case <-s.inWake:
		case <-s.stopping:
			return
		case <-s.done:
			return
		}
		for {
			s.inMu.Lock()
			if len(s.inQueue) == 0 {
				s.inMu.Unlock()
				break
			}
			p := s.inQueue[0]
			s.inQueue[0], s.inQueue = nil, s.inQueue[1:]
			s.inMu.Unlock()
			_, _ = s.pty.Write(p)
			s.inMu.Lock()
			s.inBytes -= len(p)
			s.inMu.Unlock()
		}
	}
}

// Input queues keystrokes for the program, exactly as given, and never
// blocks: a program that does not read its input holds at most InputQueue
// bytes, and input past that is refused with ErrInputFull (never merged or
// reordered). It fails with ErrClosed once the program has exited or the
// session is stopped.
func (s *Session) Input(p []byte) error {
	select {
	case <-s.stopping:
		return ErrClosed
	case <-s.done:
		return ErrClosed
	default:
	}
	s.inMu.Lock()
	if s.inBytes+len(p) > s.inMax {
		n := s.inBytes
		s.inMu.Unlock()
		return fmt.Errorf("%w: the program has not read the %d bytes before these %d", ErrInputFull, n, len(p))
	}
	s.inQueue = append(s.inQueue, bytes.Clone(p))
	s.inBytes += len(p)
	s.inMu.Unlock()
	s.coal.Input() // before the program can see it: its echo is not held
	select {
	case s.inWake <- struct{}{}:
	default:
	}
	return nil
}

// Resize changes the PTY's size (the program gets SIGWINCH) and the
// emulator's; once the program has exited, only the emulator's.
func (s *Session) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 {
		return fmt.Errorf("resize to %dx%d: size must be positive", cols, rows)
	}
	if err := s.pty.Resize(cols, rows); err != nil && !s.exited() {
		return fmt.Errorf("resize pty: %w", err)
	}
	return s.emu.Resize(cols, rows)
}

// Snapshot returns history and redraw at a batch boundary (see Batch.Offset).
func (s *Session) Snapshot() (Snapshot, error) { return s.emu.Snapshot() }

// Pid is the program's process id, also its process group id.
func (s *Session) Pid() int { return s.pty.Pid() }

// exited reports whether Done is closed: the PTY is closed after it.
func (s *Session) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Done is closed once the program has exited and all of its output has been
// delivered.
func (s *Session) Done() <-chan struct{} { return s.done }

// ExitCode is the program's exit status after Done: its code, or -1 when a
// signal ended it.
func (s *Session) ExitCode() int {
	<-s.done
	return s.pty.ExitCode()
}

// Stop kills the program's process tree (group or job), waits for the remaining output to
// be delivered and for every goroutine, then releases the PTY and emulator.
// A process that left the group and keeps the terminal open keeps the read
// waiting: Stop then gives up when ctx ends and closes the PTY, which ends
// the reader.
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
		_ = s.pty.Close()
		return fmt.Errorf("stop session: %w", ctx.Err())
	}
	s.wg.Wait()
	_ = s.emu.Close()
	if err := s.pty.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close pty: %w", err)
	}
	return nil
}

// kill ends the program's whole process tree, unless the child is already
// reaped (its pid, and so the group id, may then belong to someone else).
func (s *Session) kill() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	return s.pty.Kill()
}

var _ io.Writer = (*Coalescer)(nil)
