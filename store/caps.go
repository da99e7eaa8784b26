package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// The kinds of row a per-owner cap bounds (LimitError.Kind). Each is a row
// of one owner's, and a line on a page and in an API answer of theirs.
const (
	LimitWorkspaces  = "workspaces"   // a person's workspaces
	LimitAgentTokens = "agent tokens" // a workspace's tokens not revoked (expired ones count)
	LimitMachines    = "machines"     // a person's machines not revoked
	LimitSharedSites = "shared sites" // a person's shared sites, over all their workspaces
	LimitInvitations = "invitations"  // a person's invitations not used (expired ones count)
)

// LimitError refuses a row that would take its owner past a cap (the max
// given to CreateWorkspaceUpTo and the like); nothing was written.
type LimitError struct {
	Kind  string // one of the Limit… kinds
	Max   int    // the cap
	Count int64  // the owner's rows of that kind when the row was refused
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("store: the limit of %d %s is reached (%d)", e.Max, e.Kind, e.Count)
}

// InUser runs fn in a transaction that first takes the person's write
// lock, as InWorkspace does a workspace's: a count of the person's rows and
// the write it allows run one at a time on every instance sharing the
// database, so a cap counted in fn holds. The lock is a write that changes
// nothing (their users row on PostgreSQL; the database's write lock on
// SQLite). fn must use only tx; its error is returned as it is. ErrNotFound
// when the person does not exist.
func (db *DB) InUser(ctx context.Context, userID string, fn func(tx *gorm.DB) error) error {
	return db.txDirect(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE users SET updated_at = updated_at WHERE id = ?", userID)
		if err := affectedOne(res); err != nil {
			return err
		}
		return fn(tx)
	})
}

// asPerson runs fn holding the person (InUser) when max is a cap, and as
// plain statements when it is 0 (no cap: nothing to count).
func (db *DB) asPerson(ctx context.Context, userID string, max int, fn func(tx *gorm.DB) error) error {
	if max <= 0 {
		return fn(db.WithContext(ctx))
	}
	return db.InUser(ctx, userID, fn)
}

// inWorkspaceUpTo is asPerson for a cap per workspace (InWorkspace).
func (db *DB) inWorkspaceUpTo(ctx context.Context, workspaceID string, max int, fn func(tx *gorm.DB) error) error {
	if max <= 0 {
		return fn(db.WithContext(ctx))
	}
	return db.InWorkspace(ctx, workspaceID, fn)
}

// roomFor refuses one more row of kind when live (a count query of the
// owner's live rows) already reaches max; 0 is no cap. The caller holds the
// owner's lock.
func roomFor(live *gorm.DB, kind string, max int) error {
	if max <= 0 {
		return nil
	}
	var n int64
	if err := live.Count(&n).Error; err != nil {
		return err
	}
	if n >= int64(max) {
		return &LimitError{Kind: kind, Max: max, Count: n}
	}
	return nil
}
