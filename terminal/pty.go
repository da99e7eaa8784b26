package terminal

// The PTY layer: one program in a pseudo-terminal, the same on every
// platform. pty_unix.go opens a Unix PTY (creack/pty, through
// charmbracelet/x/xpty) and runs the program as the leader of its own session
// and process group; pty_windows.go uses ConPTY (charmbracelet/x/conpty,
// through xpty) with the program in a job object. Both give Session the same
// methods on *proc:
//
//	startProc(o Options) (*proc, error)  start o.Path in a PTY of o.Cols×o.Rows
//	Read(p) / Write(p)                    the program's output and input; Close
//	                                      ends one that waits (the daemon's
//	                                      non-blocking input path relies on it)
//	Resize(cols, rows)                    the program sees the new size
//	Kill()                                the whole process tree: the process
//	                                      group, or the job object
//	Wait() error                          reap the program, once, after Read
//	                                      has reported the end of its output
//	ExitCode()                            after Wait: its code, -1 for a signal
//	Close()                               release the PTY; safe more than once
//	Pid()                                 the program's process id
//
// Read returns an error once the program's side is closed: EIO on Unix once
// every process holding the terminal has gone, end of file on Windows once
// the program has exited and the pseudo-console has flushed its output.
