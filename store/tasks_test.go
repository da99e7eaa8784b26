package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// openTasks counts the workspace's open tasks as a reader sees them.
func openTasks(t *testing.T, db *store.DB, workspaceID string) int {
	t.Helper()
	ts, err := db.WorkspaceTasks(context.Background(), workspaceID, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range ts {
		if store.TaskOpen(task.Status) {
			n++
		}
	}
	return n
}

// capRace runs every change at once, released together, and tells how many
// were made and how many refused at the cap of openMax.
func capRace(t *testing.T, openMax int64, changes []func() error) (made, refused int) {
	t.Helper()
	return race(t, changes, func(err error) bool {
		var full *store.TooManyOpenTasksError
		return errors.As(err, &full) && full.Open == openMax
	})
}

// race runs every change at once, released together, and tells how many
// were made and how many were refused as atCap says a refusal at the cap
// reads; any other error fails the test.
func race(t *testing.T, changes []func() error, atCap func(error) bool) (made, refused int) {
	t.Helper()
	start := make(chan struct{})
	var nMade, nRefused atomic.Int64
	var wg sync.WaitGroup
	for _, change := range changes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			switch err := change(); {
			case err == nil:
				nMade.Add(1)
			case atCap(err):
				nRefused.Add(1)
			default:
				t.Errorf("a change at the cap: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(nMade.Load()), int(nRefused.Load())
}

// Cap tests race capRounds bursts, each in a workspace of its own, through
// capInstances handles on one database, as that many server instances
// sharing it (on SQLite, one file). Each burst has handles of its own: their
// first statements are still to be prepared, which widens the window
// between a count and its write; without the workspace's lock, SQLite then
// passes the cap in most bursts (with warm handles, in about half), and
// PostgreSQL in every one.
const (
	capRounds    = 4
	capInstances = 12
)

// eachBurst runs burst capRounds times on one fresh database of kind k, with
// its workspace w of owner's and fresh handles dbs, closed when it returns;
// setup is another handle, for arranging and checking.
func eachBurst(t *testing.T, k storetest.Kind, burst func(setup *store.DB, dbs []*store.DB, w *store.Workspace, owner string)) {
	ctx := context.Background()
	setup, opts := storetest.Shared(t, k)
	u, err := setup.CreateOwner(ctx, "a@example.com", "A", "hash")
	if err != nil {
		t.Fatal(err)
	}
	for round := range capRounds {
		w, err := setup.CreateWorkspace(ctx, u.ID, fmt.Sprintf("W%d", round))
		if err != nil {
			t.Fatal(err)
		}
		func() {
			var dbs []*store.DB
			defer func() {
				for _, db := range dbs {
					db.Close()
				}
			}()
			for i := range capInstances {
				db, err := store.Open(ctx, opts)
				if err != nil {
					t.Fatalf("open instance %d: %v", i, err)
				}
				dbs = append(dbs, db)
			}
			burst(setup, dbs, w, u.ID)
		}()
		if t.Failed() {
			t.Fatalf("in burst %d of %d", round+1, capRounds)
		}
	}
}

// The open-task cap holds with several instances creating at once, each
// through its own connections: exactly the cap are open afterwards.
func TestOpenTaskCapHoldsAcrossInstances(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		const openMax, perInstance = 5, 3
		eachBurst(t, k, func(setup *store.DB, dbs []*store.DB, w *store.Workspace, owner string) {
			var creates []func() error
			for i, db := range dbs {
				for j := range perInstance {
					creates = append(creates, func() error {
						_, err := db.CreateTask(context.Background(), store.NewTask{WorkspaceID: w.ID, Title: fmt.Sprintf("task %d.%d", i, j), CreatedBy: owner, OpenMax: openMax})
						return err
					})
				}
			}
			made, refused := capRace(t, openMax, creates)
			if made != openMax || refused != len(creates)-openMax {
				t.Errorf("%d creates over %d instances at a cap of %d: %d made, %d refused", len(creates), len(dbs), openMax, made, refused)
			}
			if n := openTasks(t, setup, w.ID); n != openMax {
				t.Errorf("%d tasks open, want the cap of %d", n, openMax)
			}
		})
	})
}

// Reopening finished tasks counts against the cap as creating does, on
// every instance at once: with 2 open and a cap of 5, exactly 3 of the
// reopens and creates racing together are made.
func TestReopenedTasksKeepTheCapAcrossInstances(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		const openMax, open, finished = 5, 2, 24
		eachBurst(t, k, func(setup *store.DB, dbs []*store.DB, w *store.Workspace, owner string) {
			ctx := context.Background()
			var changes []func() error
			for i := range open + finished {
				status := "completed"
				if i < open {
					status = "ongoing"
				}
				task, err := setup.CreateTask(ctx, store.NewTask{WorkspaceID: w.ID, Title: fmt.Sprintf("task %d", i), Status: status, CreatedBy: owner, OpenMax: openMax})
				if err != nil {
					t.Fatal(err)
				}
				if i < open {
					continue
				}
				db, reopen := dbs[i%len(dbs)], store.TaskStatuses[i%3] // notstarted, ongoing, blocked: all open
				changes = append(changes, func() error {
					_, err := db.UpdateTask(ctx, w.ID, task.ID, store.TaskChange{Status: reopen, OpenMax: openMax})
					return err
				})
			}
			for i, db := range dbs {
				changes = append(changes, func() error {
					_, err := db.CreateTask(ctx, store.NewTask{WorkspaceID: w.ID, Title: fmt.Sprintf("new %d", i), CreatedBy: owner, OpenMax: openMax})
					return err
				})
			}
			made, refused := capRace(t, openMax, changes)
			if made != openMax-open || refused != len(changes)-(openMax-open) {
				t.Errorf("%d reopens and creates at a cap of %d with %d open: %d made, %d refused", len(changes), openMax, open, made, refused)
			}
			if n := openTasks(t, setup, w.ID); n != openMax {
				t.Errorf("%d tasks open, want the cap of %d", n, openMax)
			}
		})
	})
}

// A status change is judged in its transaction: Allow's refusal comes back
// as it is and changes nothing; a change among open statuses or to a
// finished one needs no room, and a missing task or workspace, or a task
// of another workspace, is not found.
func TestTaskChangesAtTheCap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		u, _ := db.CreateOwner(ctx, "a@example.com", "A", "hash")
		w, _ := db.CreateWorkspace(ctx, u.ID, "W")
		open, err := db.CreateTask(ctx, store.NewTask{WorkspaceID: w.ID, Title: "open", CreatedBy: u.ID, OpenMax: 1})
		if err != nil || open.Status != "notstarted" {
			t.Fatalf("the first task: %+v %v", open, err)
		}
		done, err := db.CreateTask(ctx, store.NewTask{WorkspaceID: w.ID, Title: "done", Status: "rejected", CreatedBy: u.ID, OpenMax: 1})
		if err != nil {
			t.Fatalf("a finished task at the cap: %v", err)
		}
		no := errors.New("no")
		if _, err := db.UpdateTask(ctx, w.ID, done.ID, store.TaskChange{Status: "completed", Allow: func(from string) error {
			if from != "rejected" {
				t.Errorf("Allow saw %q, want rejected", from)
			}
			return no
		}}); err != no {
			t.Fatalf("a change Allow refused: %v", err)
		}
		if _, err := db.UpdateTask(ctx, w.ID, done.ID, store.TaskChange{Status: "ongoing", OpenMax: 1}); !errors.As(err, new(*store.TooManyOpenTasksError)) {
			t.Fatalf("reopening at the cap: %v", err)
		}
		if got, err := db.UpdateTask(ctx, w.ID, open.ID, store.TaskChange{Title: "still open", Status: "blocked", OpenMax: 1}); err != nil || got.Status != "blocked" || got.Title != "still open" {
			t.Fatalf("an open task blocked at the cap: %+v %v", got, err)
		}
		if got, err := db.WorkspaceTask(ctx, w.ID, done.ID); err != nil || got.Status != "rejected" {
			t.Fatalf("the refused task: %+v %v", got, err)
		}
		if _, err := db.UpdateTask(ctx, w.ID, "missing", store.TaskChange{Status: "ongoing", OpenMax: 1}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a missing task: %v", err)
		}
		other, _ := db.CreateWorkspace(ctx, u.ID, "Other")
		if _, err := db.UpdateTask(ctx, other.ID, open.ID, store.TaskChange{Status: "completed"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a task changed through another workspace: %v", err)
		}
		if _, err := db.CreateTask(ctx, store.NewTask{WorkspaceID: "missing", Title: "x", CreatedBy: u.ID, OpenMax: 1}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a task in a missing workspace: %v", err)
		}
	})
}
