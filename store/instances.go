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

// SetInstance names the server instance that begins calls through this
// pool: each running call records it (audit_running.instance_id), so that
// InterruptInstance can end the calls of an instance that died.
func (db *DB) SetInstance(id string) { db.instance.Store(&id) }

func (db *DB) instanceID() string {
	if p := db.instance.Load(); p != nil {
		return *p
	}
	return ""
}

// InterruptInstance marks as interrupted the calls an instance left running:
// it died (its heartbeat went stale) or it restarted with the same id, and
// nothing of it finishes them.
func (db *DB) InterruptInstance(ctx context.Context, id string) (int64, error) {
	if id == "" {
		return 0, nil
	}
	return db.interruptRunning(ctx, db.WithContext(ctx).Table("audit_running").Where("instance_id = ?", id))
}
