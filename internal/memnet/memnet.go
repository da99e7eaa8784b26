// Package memnet is an in-memory network for tests: a net.Listener whose
// connections are net.Pipe pairs opened by its Dial. Nothing blocks on the
// operating system's network, so code under test that serves and dials
// through it runs inside a testing/synctest bubble, its deadlines and timers
// on the bubble's clock. It is not a network simulator: no addresses, no
// latency, no loss. (The idea is tailscale's tstest/memnet; the code is
// this one file.)
package memnet

import (
	"context"
	"net"
	"sync"
)

// Listener hands Accept the server ends of the pipes Dial opens.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Listen returns a new Listener. Create it inside the bubble that uses it.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial; connections already open stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder: the network has no addresses.
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial opens a connection to the listener, whatever network and address it
// is given; its signature fits websocket.Dialer.NetDialContext and
// http.Transport.DialContext.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type addr struct{}

func (addr) Network() string { return "memnet" }
func (addr) String() string  { return "memnet" }
