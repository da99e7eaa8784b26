//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import (
	"net"
	"time"
)

var (
	aLongTimeAgo = time.Unix(1, 0)
	noDeadline   time.Time
)

// watchConn cannot peek at a connection on this platform: a client that
// goes away is noticed only through its MCP session ending.
func watchConn(net.Conn, func()) (*connWatch, bool) { return nil, false }

// closed cannot look at a connection on this platform.
func (w *connWatch) closed() bool { return false }
