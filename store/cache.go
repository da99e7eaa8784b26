package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// hotTTL is how long the hot-path caches (agent identities, a workspace's
// shared sites, OAuth access tokens) trust what they read. Changes made
// through this DB clear them at once and, through OnInvalidate, the other
// instances' at once too (docs/DECISIONS.md, "Several instances"); while the
// signal bus is down (SetCacheTrust) nothing is trusted. The TTL is only a
// backstop.
const hotTTL = 30 * time.Second

// ttlCache is a small map whose entries expire. Every MCP request reads an
// agent identity and every call a workspace's sites; caching them briefly
// takes two queries off each call.
type ttlCache[V any] struct {
	// name and hooks are static after Open: the cache's name in signals,
	// and the DB's invalidation hook and trust switch.
	name  string
	hooks *cacheHooks

	mu      sync.Mutex
	entries map[string]ttlEntry[V] // guarded by mu
}

// cacheHooks connects the caches to the signal bus (server wiring).
type cacheHooks struct {
	// trusted, when set, says whether cached entries may be used at all.
	trusted atomic.Pointer[func() bool]
	// invalidated, when set, is told the name of each cache a write cleared.
	invalidated atomic.Pointer[func(name string)]
}

type ttlEntry[V any] struct {
	v  V
	at time.Time
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hooks != nil {
		if f := c.hooks.trusted.Load(); f != nil && !(*f)() {
			var zero V
			return zero, false
		}
	}
	e, ok := c.entries[key]
	if !ok || time.Since(e.at) > hotTTL {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) > 10000 {
		c.entries = map[string]ttlEntry[V]{} // bounded: start over rather than grow
	}
	c.entries[key] = ttlEntry[V]{v: v, at: time.Now()}
}

// clear drops every entry, here and (through the hook) on every other
// instance: writes are rare, so a write clears the lot.
func (c *ttlCache[V]) clear() {
	c.clearLocal()
	if c.hooks != nil {
		if f := c.hooks.invalidated.Load(); f != nil {
			(*f)(c.name)
		}
	}
}

func (c *ttlCache[V]) clearLocal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
}

// ttlValue is one cached value that expires after ttl.
type ttlValue[V any] struct {
	mu sync.Mutex
	v  V         // guarded by mu
	at time.Time // guarded by mu; zero: nothing cached
}

func (c *ttlValue[V]) get(ttl time.Duration) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > ttl {
		var zero V
		return zero, false
	}
	return c.v, true
}

func (c *ttlValue[V]) put(v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v, c.at = v, time.Now()
}

// The names of the caches in invalidation signals.
const (
	CacheAgents = "agents"
	CacheSites  = "sites"
	CacheOAuth  = "oauth"
)

// OnInvalidate sets the hook told the name of each cache a write through
// this DB cleared, so the server can tell the other instances.
func (db *DB) OnInvalidate(fn func(name string)) { db.hooks.invalidated.Store(&fn) }

// SetCacheTrust sets the switch that says whether cached entries may be
// used: false while another instance's invalidation could be missed.
func (db *DB) SetCacheTrust(fn func() bool) { db.hooks.trusted.Store(&fn) }

// Invalidated clears the named cache (CacheAgents, …; "" for all) without
// telling anyone: another instance's write said so.
func (db *DB) Invalidated(name string) {
	if name == "" || name == CacheAgents {
		db.agents.clearLocal()
	}
	if name == "" || name == CacheSites {
		db.sites.clearLocal()
	}
	if name == "" || name == CacheOAuth {
		db.oauth.clearLocal()
	}
}

// PostgresURL is the URL the DB was opened with on PostgreSQL ("" on
// SQLite), for the connection that listens for signals.
func (db *DB) PostgresURL() string { return db.url }
