package terminal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"unsafe"

	"github.com/charmbracelet/x/xpty"
	"golang.org/x/sys/windows"
)

// proc is a program in a ConPTY pseudo-console, in a job object that holds
// every process it starts (see pty.go).
//
// ConPTY keeps its output pipe open after the program exits (the console
// host holds it), so a waiter goroutine closes the pseudo-console once the
// program has exited: the console host flushes what it has left, and Read
// then ends. os/exec's Wait does not work on ConPTY processes
// (golang/go#62710); the waiter uses Process.Wait, as xpty.WaitProcess does.
type proc struct {
	cpty   *xpty.ConPty   // static
	cmd    *exec.Cmd      // static
	job    windows.Handle // static; closed by Close
	exited chan struct{}  // closed by the waiter once state is set
	state  *os.ProcessState
	werr   error
	once   sync.Once
}

func startProc(o Options) (*proc, error) {
	cpty, err := xpty.NewConPty(o.Cols, o.Rows)
	if err != nil {
		return nil, fmt.Errorf("open conpty: %w", err)
	}
	job, err := newKillJob()
	if err != nil {
		_ = cpty.Close()
		return nil, err
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	if err := cpty.Start(cmd); err != nil {
		_ = cpty.Close()
		_ = windows.CloseHandle(job)
		return nil, err
	}
	p := &proc{cpty: cpty, cmd: cmd, job: job, exited: make(chan struct{})}
	// A child the program starts before this assignment escapes the job;
	// conpty's Spawn gives no thread handle to start it suspended.
	if err := assign(job, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		go p.wait()
		<-p.exited
		_ = p.Close()
		return nil, err
	}
	go p.wait()
	return p, nil
}

// newKillJob makes a job object that ends every process in it when it is
// terminated or its last handle closes.
func newKillJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("create job object: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return 0, fmt.Errorf("set job object limits: %w", err)
	}
	return job, nil
}

func assign(job windows.Handle, pid int) error {
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return fmt.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		return fmt.Errorf("assign process to job object: %w", err)
	}
	return nil
}

// wait reaps the program, then closes the pseudo-console so Read ends.
func (p *proc) wait() {
	p.state, p.werr = p.cmd.Process.Wait()
	p.cmd.ProcessState = p.state
	close(p.exited)
	_ = p.cpty.Close()
}

// Read reads the console's output; a closed or broken pipe is the end.
func (p *proc) Read(b []byte) (int, error) {
	n, err := p.cpty.Read(b)
	if err != nil && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (p *proc) Write(b []byte) (int, error) { return p.cpty.Write(b) }

func (p *proc) Resize(cols, rows int) error { return p.cpty.Resize(cols, rows) }

// Kill terminates every process in the job.
func (p *proc) Kill() error {
	if err := windows.TerminateJobObject(p.job, 1); err != nil {
		return fmt.Errorf("terminate job object: %w", err)
	}
	return nil
}

// Wait returns once the program has exited, with exec's error shape: an
// *exec.ExitError for a code other than 0.
func (p *proc) Wait() error {
	<-p.exited
	if p.werr != nil {
		return p.werr
	}
	if !p.state.Success() {
		return &exec.ExitError{ProcessState: p.state}
	}
	return nil
}

func (p *proc) ExitCode() int { return p.state.ExitCode() }
func (p *proc) Pid() int      { return p.cmd.Process.Pid }

// Close closes the pseudo-console (ending a read or write waiting on it)
// and the job, which ends whatever the program left running.
func (p *proc) Close() error {
	err := os.ErrClosed
	p.once.Do(func() {
		err = errors.Join(p.cpty.Close(), windows.CloseHandle(p.job))
	})
	return err
}
