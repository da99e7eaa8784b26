package approvals_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// Pending-cap races run capRounds bursts, each through capInstances fresh
// handles on one database with a gate on each, as that many server
// instances sharing it (on SQLite, one file), capCalls calls on each. Fresh
// handles still have their statements to prepare, which widens the window
// between a count and its insert: without the workspace's lock the bursts
// passed the cap on both databases.
const (
	capRounds    = 3
	capInstances = 8
	capCalls     = 2
)

// pendingRace races capInstances*capCalls calls with distinct arguments
// (args(i), so none collapse) through gates with the limits of o, released
// together, and reports how many opened a request and how many were refused
// with a LimitError; the requests it opened are withdrawn before it returns.
func pendingRace(t *testing.T, k storetest.Kind, o approvals.Options, args func(i int) string) (opened, refused int) {
	t.Helper()
	ctx := context.Background()
	setup, opts := storetest.Shared(t, k)
	w := newWorld(t, setup, time.Minute)
	var dbs []*store.DB
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	var gates []*approvals.Gate
	for i := range capInstances {
		db, err := store.Open(ctx, opts)
		if err != nil {
			t.Fatalf("open instance %d: %v", i, err)
		}
		dbs = append(dbs, db)
		o := o
		o.DB, o.Window, o.InstanceID = db, time.Minute, fmt.Sprintf("i%d", i)
		gates = append(gates, approvals.New(o))
	}
	n := capInstances * capCalls
	outcomes := make(chan error, n) // nil: the call opened a request and waits on it
	calls, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }() // the waiting calls leave, withdrawing their requests
	start := make(chan struct{})
	for i := range n {
		gate, call := gates[i%capInstances], w.call("buy", args(i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			opened := false
			sink := approvals.WithRequestSink(calls, func(string) { opened = true; outcomes <- nil })
			if _, err := gate.Decide(sink, call); !opened {
				outcomes <- err
			}
		}()
	}
	close(start)
	for range n {
		var limit *approvals.LimitError
		switch err := testutil.RequireReceive(t, testutil.WaitShort, outcomes); {
		case err == nil:
			opened++
		case errors.As(err, &limit):
			refused++
		default:
			t.Errorf("a call at the cap: %v", err)
		}
	}
	pending, err := w.gate.Pending(ctx, w.owner, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != opened {
		t.Errorf("%d requests pending, %d calls told theirs opened", len(pending), opened)
	}
	return opened, refused
}

// The pending-request cap holds with calls arriving on several instances at
// once: exactly the cap open requests, the rest are refused.
func TestPendingCapHoldsAcrossInstances(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		const maxPending = 4
		for round := range capRounds {
			opened, refused := pendingRace(t, k, approvals.Options{MaxPending: maxPending},
				func(i int) string { return fmt.Sprintf(`{"item":%d}`, i) })
			if opened != maxPending || refused != capInstances*capCalls-maxPending {
				t.Fatalf("burst %d: %d calls over %d instances at a cap of %d: %d opened, %d refused",
					round+1, capInstances*capCalls, capInstances, maxPending, opened, refused)
			}
		}
	})
}

// The cap on bytes of arguments waiting holds the same way: calls of equal
// size, with room for three of them, open exactly three requests.
func TestPendingBytesCapHoldsAcrossInstances(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		const fit = 3
		pad := strings.Repeat("x", 200)
		args := func(i int) string { return fmt.Sprintf(`{"item":"%04d%s"}`, i, pad) }
		size := len("{\n  \"item\": \"0000" + pad + "\"\n}") // as the person reads it
		for round := range capRounds {
			opened, refused := pendingRace(t, k, approvals.Options{MaxPending: 100, MaxPendingBytes: fit*size + size/2}, args)
			if opened != fit || refused != capInstances*capCalls-fit {
				t.Fatalf("burst %d: %d calls of %d bytes over %d instances with room for %d: %d opened, %d refused",
					round+1, capInstances*capCalls, size, capInstances, fit, opened, refused)
			}
		}
	})
}

// A call identical to a request already waiting joins it even when the
// workspace is at its cap, on whichever instance it arrives: it asks nothing
// new, so it adds nothing to the limits.
func TestIdenticalCallAtTheCapJoinsOnAnotherInstance(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		ctx := context.Background()
		setup, opts := storetest.Shared(t, k)
		w := newWorld(t, setup, time.Minute)
		var gates []*approvals.Gate
		for i := range 2 {
			db, err := store.Open(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			gates = append(gates, approvals.New(approvals.Options{DB: db, Window: time.Minute, InstanceID: fmt.Sprintf("i%d", i), MaxPending: 1}))
		}
		calls, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		waits := make(chan string, 2)
		errs := make(chan error, 2)
		ask := func(gate *approvals.Gate) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := gate.Decide(approvals.WithRequestSink(calls, func(id string) { waits <- id }), w.call("buy", `{"item":1}`))
				errs <- err
			}()
		}
		ask(gates[0])
		first := testutil.RequireReceive(t, testutil.WaitShort, waits)
		ask(gates[1])
		select {
		case second := <-waits:
			if second != first {
				t.Fatalf("the identical call waits on request %s, not on %s, the one already asked", second, first)
			}
		case err := <-errs:
			t.Fatalf("the identical call on another instance at the cap: %v", err)
		case <-time.After(testutil.WaitShort):
			t.Fatal("the identical call on another instance neither joined nor failed")
		}
		pending, err := w.gate.Pending(ctx, w.owner, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 1 || pending[0].Waiters != 2 {
			t.Fatalf("pending after the join: %+v, want one request with 2 calls waiting", pending)
		}
	})
}

// TestAWorkspaceDeletedWhileACallIsPlacedSaysSo: the person deletes the workspace after the
// call's task was found and before its request is opened. The call is refused with
// ErrWorkspaceGone (the agent is told its workspace went), no request is left behind, and
// nothing is asked.
func TestAWorkspaceDeletedWhileACallIsPlacedSaysSo(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		// The grant lookup comes after the task check and before the request is opened: the
		// workspace goes then, as a person's delete on another tab would. The hook goes on before
		// anything uses the database (gorm's callbacks may not change under running queries) and
		// stays: it acts once, when armed.
		var armed atomic.Bool
		var w *world
		err := db.Callback().Query().Before("gorm:query").Register("test:delete_workspace", func(tx *gorm.DB) {
			if tx.Statement.Table == "grants" && armed.CompareAndSwap(true, false) {
				if err := db.DeleteWorkspace(ctx, w.owner, w.ws); err != nil {
					t.Errorf("delete the workspace: %v", err)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		w = newWorld(t, db, time.Minute)
		armed.Store(true)
		_, err = w.gate.Decide(ctx, w.call("buy", `{"item":1}`))
		if !errors.Is(err, approvals.ErrWorkspaceGone) {
			t.Fatalf("a call whose workspace went while it was placed: %v, want ErrWorkspaceGone", err)
		}
		if n, err := w.gate.PendingCount(ctx, w.owner); err != nil || n != 0 {
			t.Fatalf("pending after the refusal: %d, %v", n, err)
		}
	})
}
