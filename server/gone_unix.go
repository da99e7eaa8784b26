//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

var (
	aLongTimeAgo = time.Unix(1, 0)
	noDeadline   time.Time
)

// watchConn calls onGone once when the peer of conn closes it (FIN or RST).
// It peeks (MSG_PEEK) through the runtime's poller, so it never takes a byte
// that fasthttp would read: if the client sends data instead (a pipelined
// request, or a TLS alert), the watch ends without firing. false means this
// kind of connection cannot be watched.
func watchConn(conn net.Conn, onGone func()) (*connWatch, bool) {
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	w := &connWatch{conn: raw, raw: rc, done: make(chan struct{})}
	// The watcher starts only once the request has run for watchAfter: most
	// calls are answered sooner, and a goroutine parked on the poller, its
	// wake-up and the deadline changes that stop it were spent on every POST
	// (docs/DECISIONS.md). A peer gone before then
	// is seen at once when the watcher starts; the look before a call is
	// dispatched (closed) does not wait for it.
	w.timer = time.AfterFunc(watchAfter, func() {
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return
		}
		w.started = true
		w.mu.Unlock()
		defer close(w.done)
		if w.peek(rc) {
			onGone()
		}
	})
	return w, true
}

// watchAfter is how long a request runs before its connection is watched.
const watchAfter = 20 * time.Millisecond

// closed looks at the socket once, without blocking and without taking a
// byte (MSG_PEEK): true if the peer closed it (end of stream, or an error
// such as ECONNRESET). It uses Control, not Read, so it runs beside the
// watch's own blocked peek.
func (w *connWatch) closed() bool {
	buf := make([]byte, 1)
	gone := false
	err := w.raw.Control(func(fd uintptr) {
		n, _, perr := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case perr == nil:
			gone = n == 0
		case errors.Is(perr, syscall.EAGAIN), errors.Is(perr, syscall.EINTR):
		default:
			gone = true
		}
	})
	return gone || err != nil
}

// peek blocks until the peer closes the connection (true), sends data, or
// the watch stops (false). A read deadline fasthttp set for the request
// (ReadTimeout) is cleared and the wait goes on.
func (w *connWatch) peek(rc syscall.RawConn) bool {
	buf := make([]byte, 1)
	for {
		var n int
		var perr error
		err := rc.Read(func(fd uintptr) bool {
			n, _, perr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return !errors.Is(perr, syscall.EAGAIN) && !errors.Is(perr, syscall.EINTR)
		})
		switch {
		case err == nil && perr == nil:
			return n == 0 // 0 bytes: the peer closed; data: it is still there
		case err == nil:
			return true // ECONNRESET and the like: the connection is gone
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.mu.Lock()
			stopped := w.stopped
			if !stopped {
				_ = w.conn.SetReadDeadline(noDeadline)
			}
			w.mu.Unlock()
			if stopped {
				return false
			}
		default:
			return true // the connection was closed under us
		}
	}
}
