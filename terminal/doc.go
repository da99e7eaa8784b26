// Package terminal owns what one terminal session is on the machine that runs
// it: the PTY and the process group behind it, a terminal emulator fed every
// byte the program writes, redraws of the current screen for viewers that
// attach late or fall behind, and the batching of output into windows cut
// only where the escape parser is in its ground state.
//
// It knows nothing of HTTP, WebSockets, viewers or the server: callers get
// ordered batches with their byte offsets and snapshots (history and a
// redraw) stamped with the offset they describe, and splice the two.
package terminal
