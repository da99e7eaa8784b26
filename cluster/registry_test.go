package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// clock is a settable clock shared by the instances of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// buried records what OnDead was given.
type buried struct {
	mu    sync.Mutex
	calls map[string][]cluster.Link
}

func (b *buried) onDead(_ context.Context, id string, links []cluster.Link) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls == nil {
		b.calls = map[string][]cluster.Link{}
	}
	b.calls[id] = append(b.calls[id], links...)
	return nil
}

func (b *buried) get(id string) ([]cluster.Link, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.calls[id]
	return l, ok
}

func newRegistry(t *testing.T, db *store.DB, c *clock, b *buried, id string, single bool) *cluster.Registry {
	t.Helper()
	r := cluster.New(cluster.Options{DB: db, ID: id, Heartbeat: time.Hour, DeadAfter: 15 * time.Second, Now: c.now, OnDead: b.onDead, Single: single})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// TestRegistryDeadOnlyWhenStale: a living instance's leftovers are left
// alone; once its heartbeat is older than DeadAfter another instance cleans
// them, once, with the links it held.
func TestRegistryDeadOnlyWhenStale(t *testing.T) {
	db := storetest.Open(t, storetest.Postgres)
	ctx := context.Background()
	c := &clock{t: store.Now()}
	var b buried
	a := newRegistry(t, db, c, &b, "a", false)
	other := newRegistry(t, db, c, &b, "b", false)
	if err := a.Link(ctx, cluster.LinkBrowser, "browser-1", "user-1"); err != nil {
		t.Fatal(err)
	}
	c.add(10 * time.Second)
	if err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.get("a"); ok {
		t.Fatal("a living instance (heartbeat 10 s old, dead after 15 s) was cleaned")
	}
	if other.Size() != 2 {
		t.Fatalf("registry size %d, want 2", other.Size())
	}
	c.add(6 * time.Second)
	if err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	links, ok := b.get("a")
	if !ok || len(links) != 1 || links[0].LinkID != "browser-1" || links[0].UserID != "user-1" {
		t.Fatalf("dead instance's cleanup got %v (called %v), want its one browser link", links, ok)
	}
	if err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if links, _ := b.get("a"); len(links) != 1 {
		t.Fatalf("links handed over twice: %v", links)
	}
	if other.Size() != 1 {
		t.Fatalf("registry size %d after the death, want 1", other.Size())
	}
}

// TestRegistryStoppedIsDead: a gracefully stopped instance is cleaned at the
// next sweep, without waiting for its heartbeat to go stale.
func TestRegistryStoppedIsDead(t *testing.T) {
	db := storetest.Open(t, storetest.Postgres)
	ctx := context.Background()
	c := &clock{t: store.Now()}
	var b buried
	a := newRegistry(t, db, c, &b, "a", false)
	other := newRegistry(t, db, c, &b, "b", false)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.get("a"); !ok {
		t.Fatal("a stopped instance was not cleaned")
	}
}

// TestRegistryRestartSameID: an instance started again with its previous
// id cleans that run's leftovers at once, on both databases.
func TestRegistryRestartSameID(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c := &clock{t: store.Now()}
		var b buried
		first := cluster.New(cluster.Options{DB: db, ID: "same", Heartbeat: time.Hour, Now: c.now})
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := first.Link(ctx, cluster.LinkMachine, "m1", "u1"); err != nil {
			t.Fatal(err)
		}
		// killed: no Close
		newRegistry(t, db, c, &b, "same", false)
		if links, ok := b.get("same"); !ok || len(links) != 1 || links[0].Kind != cluster.LinkMachine {
			t.Fatalf("restart with the same id cleaned %v (%v), want the machine link", links, ok)
		}
	})
}

// TestRegistrySingle: on SQLite one instance is the only supported mode, so
// a start cleans every other row, however fresh its heartbeat.
func TestRegistrySingle(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	ctx := context.Background()
	c := &clock{t: store.Now()}
	var b buried
	old := cluster.New(cluster.Options{DB: db, ID: "old", Heartbeat: time.Hour, Now: c.now, Single: true})
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	newRegistry(t, db, c, &b, "new", true)
	if _, ok := b.get("old"); !ok {
		t.Fatal("a single-instance start left the previous instance's row")
	}
}
