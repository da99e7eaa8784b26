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
	// active reports whether a sign-in is still live (the database's word);
	// static.
	active func(ctx context.Context, family string) (bool, error)

	mu    sync.Mutex
	next  int
	ended map[string]map[int]context.CancelFunc // family → what to end
}

func newSignIns(active func(ctx context.Context, family string) (bool, error)) *signIns {
	return &signIns{active: active, ended: map[string]map[int]context.CancelFunc{}}
}

// follow returns a context that is cancelled when family's sign-in ends or
// parent is done, and a stop function that releases it. It registers first
// and then asks whether the sign-in is still live, so a sign-out cannot slip
// between a ticket's redeem and the socket it opens: either the sign-out's
// end finds the registration, or the check (after it) finds the sign-in
// ended and the context is cancelled at once. A failed check counts as
// ended: a socket nobody can vouch for is closed. A socket opened with a
// ticket from before tickets knew their sign-in has family "": it follows
// nothing.
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
	if live, err := s.active(ctx, family); err != nil || !live {
		cancel()
	}
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
