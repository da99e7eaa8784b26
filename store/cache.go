package store

import (
	"sync"
	"time"
)

// hotTTL is how long the hot-path caches (agent identities, a workspace's
// shared sites) trust what they read. Changes made through this DB clear
// them at once; a change made by another server instance is seen within it.
const hotTTL = 2 * time.Second

// ttlCache is a small map whose entries expire. Every MCP request reads an
// agent identity and every call a workspace's sites; caching them briefly
// takes two queries off each call.
type ttlCache[V any] struct {
	mu      sync.Mutex
	entries map[string]ttlEntry[V] // guarded by mu
}

type ttlEntry[V any] struct {
	v  V
	at time.Time
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// clear drops every entry: writes are rare, so a write clears the lot.
func (c *ttlCache[V]) clear() {
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
