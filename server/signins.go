package server

import (
	"context"
	"sync"
)

// signIns ends what a sign-in opened when the sign-in ends (sign-out, or a
// reused refresh token revoking it): its event streams, and the extension
// socket and terminal viewers opened with its tickets. Without it a browser
// signed out of Tabbridge would go on running agents' calls in its tabs and
// typing into terminals until it happened to reconnect.
//
// It is per process, as the sockets are; a sign-in ended on another
// instance is noticed at the sockets' next ticket (README: one instance).
type signIns struct {
	mu    sync.Mutex
	next  int
	ended map[string]map[int]context.CancelFunc // family → what to end
}

func newSignIns() *signIns {
	return &signIns{ended: map[string]map[int]context.CancelFunc{}}
}

// follow returns a context that is cancelled when family's sign-in ends or
// parent is done, and a stop function that releases it. A socket opened
// with a ticket from before tickets knew their sign-in has family "": it
// follows nothing.
func (s *signIns) follow(parent context.Context, family string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	if family == "" {
		return ctx, cancel
	}
	s.mu.Lock()
	s.next++
	id := s.next
	if s.ended[family] == nil {
		s.ended[family] = map[int]context.CancelFunc{}
	}
	s.ended[family][id] = cancel
	s.mu.Unlock()
	return ctx, func() {
		cancel()
		s.mu.Lock()
		delete(s.ended[family], id)
		if len(s.ended[family]) == 0 {
			delete(s.ended, family)
		}
		s.mu.Unlock()
	}
}

// end cancels everything following family.
func (s *signIns) end(family string) {
	s.mu.Lock()
	cancels := s.ended[family]
	delete(s.ended, family)
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}
