package store

import (
	"context"
	"time"
)

// InterruptRunningBefore marks as interrupted the calls still running that
// began before cutoff: no call lives that long (approval window, grace and
// call deadline together), so the instance that ran it is gone. With several
// instances this replaces InterruptRunning at start, which would cut the
// calls the other instances are running. A call's id is a UUIDv7, so "began
// before cutoff" is an id range of audit_running.
func (db *DB) InterruptRunningBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	return db.interruptRunning(ctx, db.WithContext(ctx).Table("audit_running").Where("id < ?", idFloor(cutoff)))
}
