package store

import (
	"context"
	"fmt"
	"time"
)

// InterruptRunningBefore marks as interrupted the calls still running that
// began before cutoff: no call lives that long (approval window, grace and
// call deadline together), so the instance that ran it is gone. With several
// instances this replaces InterruptRunning at start, which would cut the
// calls the other instances are running.
func (db *DB) InterruptRunningBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	res := db.WithContext(ctx).Model(&AuditEntry{}).Where("outcome = '"+OutcomeRunning+"' AND created_at < ?", cutoff).
		Updates(map[string]any{"outcome": OutcomeInterrupted,
			"error": "The Tabbridge server instance running this call stopped while it was waiting or running; whether it had an effect in the page is unknown."})
	if res.Error != nil {
		return 0, fmt.Errorf("interrupt running calls: %w", res.Error)
	}
	return res.RowsAffected, nil
}
