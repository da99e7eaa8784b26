package server

import (
	"context"
	"sync"
	"time"
)

// followers ends what a credential opened when the credential ends. For a
// sign-in (keyed by its refresh family): its event streams, and the
// extension socket and terminal viewers opened with its tickets, so a
// browser signed out of Tabbridge stops running agents' calls in its tabs
// and typing into terminals at once. For a machine (keyed by its id): its
// daemon's socket, so a revoked machine is cut off even when its daemon
// was admitted a moment before.
//
// For an agent (keyed by its token's or OAuth grant's id): its running
// tool calls and its MCP sessions, so an agent whose access the person took
// away stops at once (docs/DECISIONS.md, "Revocation ends what it started").
//
// The sockets are per process; an ending on one instance reaches the
// others through the signal bus (onEnd here, endLocal there), and after a
// bus outage recheck asks the database about every key followed.
type followers struct {
	// live reports whether a key's credential is still good (the
	// database's word); static.
	live func(ctx context.Context, key string) (bool, error)
	// vouched, when set, makes follow take the credential as good without
	// asking live: whoever follows authenticated it a moment before, and a
	// query per follow would cost every agent's tool call one. An ending
	// between that authentication and the follow is caught by endedAt
	// instead. Static.
	vouched bool
	// onEnd, when set, is told each key ended here, to tell the other
	// instances; set before the server serves, then static.
	onEnd func(key string)

	mu    sync.Mutex
	next  int
	byKey map[string]map[int]context.CancelFunc // key → what to end; guarded by mu
	// endedAt remembers, when vouched, the keys ended here in the last
	// endedMemory; guarded by mu.
	endedAt map[string]time.Time
}

// endedMemory is how long vouched followers remember an ending: far longer
// than a request takes from its authentication to its follow.
const endedMemory = 10 * time.Minute

func newFollowers(live func(ctx context.Context, key string) (bool, error)) *followers {
	return &followers{live: live, byKey: map[string]map[int]context.CancelFunc{}}
}

// newVouchedFollowers returns followers whose follow does not ask live (see
// vouched); recheck still does.
func newVouchedFollowers(live func(ctx context.Context, key string) (bool, error)) *followers {
	f := newFollowers(live)
	f.vouched, f.endedAt = true, map[string]time.Time{}
	return f
}

// follow returns a context that is cancelled when key's credential ends or
// parent is done, and a stop function that releases it. It registers first
// and then asks whether the credential is still good, so an ending cannot
// slip between admitting a socket and the socket following it: either the
// ending's end (which comes after its write to the database) finds the
// registration, or the check (which comes after the registration) finds the
// credential ended and the context is cancelled at once. A failed check
// counts as ended: a socket nobody can vouch for is closed. Key "" (a socket
// opened with a ticket from before tickets knew their sign-in) follows
// nothing. Vouched followers look only at the endings remembered here.
func (f *followers) follow(parent context.Context, key string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	if key == "" {
		return ctx, cancel
	}
	f.mu.Lock()
	f.next++
	id := f.next
	if f.byKey[key] == nil {
		f.byKey[key] = map[int]context.CancelFunc{}
	}
	f.byKey[key][id] = cancel
	_, ended := f.endedAt[key]
	f.mu.Unlock()
	if ended {
		cancel()
	} else if !f.vouched {
		if live, err := f.live(ctx, key); err != nil || !live {
			cancel()
		}
	}
	return ctx, func() {
		cancel()
		f.mu.Lock()
		delete(f.byKey[key], id)
		if len(f.byKey[key]) == 0 {
			delete(f.byKey, key)
		}
		f.mu.Unlock()
	}
}

// end cancels everything following key, here and on every other instance.
// Call it after the credential's end is in the database.
func (f *followers) end(key string) {
	f.endLocal(key)
	if f.onEnd != nil {
		f.onEnd(key)
	}
}

// recheck ends every followed key whose credential the database no longer
// vouches for: endings signalled while the bus was down were missed.
func (f *followers) recheck(ctx context.Context) {
	f.mu.Lock()
	keys := make([]string, 0, len(f.byKey))
	for k := range f.byKey {
		keys = append(keys, k)
	}
	f.mu.Unlock()
	for _, k := range keys {
		if live, err := f.live(ctx, k); err != nil || !live {
			f.endLocal(k)
		}
	}
}

// endLocal cancels what follows key on this instance only.
func (f *followers) endLocal(key string) {
	f.mu.Lock()
	cancels := f.byKey[key]
	delete(f.byKey, key)
	if f.vouched {
		now := time.Now()
		for k, at := range f.endedAt {
			if now.Sub(at) > endedMemory {
				delete(f.endedAt, k)
			}
		}
		f.endedAt[key] = now
	}
	f.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}
