package approvals

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Limits on the requests one workspace (one agent's tokens) may have waiting
// for the person at once (issue 11; docs/DECISIONS.md). A burst of requests
// must not bury the person's inbox or the server's memory: 300 requests in
// 2 s, or 40 of 1 MB each (a 40 MB inbox page, +850 MB RSS), were possible.
const (
	// DefaultMaxPending is how many requests may wait per workspace: more
	// than a person reviews in one sitting.
	DefaultMaxPending = 20
	// DefaultMaxPendingBytes is how many bytes of arguments (as the person
	// reads them, pretty-printed) may wait per workspace: room for one call
	// at the 1 MiB argument limit and more besides.
	DefaultMaxPendingBytes = 4 << 20
)

// LimitError is a request refused because its workspace already has as many
// requests, or bytes of arguments, waiting as it may. Message is the
// sentence for the agent.
type LimitError struct{ Message string }

func (e *LimitError) Error() string { return "approvals: " + e.Message }

// admit checks that a new request of size bytes of arguments fits its
// workspace's limits, counted over the pending requests of every instance.
// tx holds the workspace (store.DB.InWorkspace, in open) and inserts the
// request after it: the count and the insert of one workspace run one at a
// time on every instance sharing the database, so no burst, on one instance
// or spread over several, passes the limits.
func (g *Gate) admit(tx *gorm.DB, workspaceID string, size int) error {
	var agg struct {
		Count int
		Bytes int
	}
	err := tx.Model(&Request{}).Select("COUNT(*) AS count, COALESCE(SUM(LENGTH(arguments)), 0) AS bytes").
		Where("workspace_id = ? AND status = ?", workspaceID, StatusPending).Scan(&agg).Error
	if err != nil {
		return fmt.Errorf("count pending requests: %w", err)
	}
	count, bytes := agg.Count, agg.Bytes
	if count >= g.opts.MaxPending {
		noun := "calls"
		if count == 1 {
			noun = "call"
		}
		return &LimitError{Message: fmt.Sprintf("This workspace already has %d %s waiting for the person's approval, the most one workspace may have waiting. "+
			"Wait for the person to answer some of them (each comes back as the result of its call), then call again.", count, noun)}
	}
	if bytes+size > g.opts.MaxPendingBytes {
		return &LimitError{Message: fmt.Sprintf("The calls of this workspace waiting for the person's approval already hold %s of arguments; with this call's %s "+
			"they would pass the %s one workspace may have waiting. Wait for the person to answer some of them, or send smaller arguments, then call again.",
			sizeText(bytes), sizeText(size), sizeText(g.opts.MaxPendingBytes))}
	}
	return nil
}

// open inserts req, a new pending request, if its workspace's limits admit
// arguments of size bytes more: counted and inserted in one transaction that
// holds the workspace. It returns admit's *LimitError as it is, and
// gorm.ErrDuplicatedKey when an identical request is pending already — looked
// for before the limits, since a call that joins a request adds nothing to
// them (at the cap, an identical call on another instance was refused instead
// of joining the question already asked).
func (g *Gate) open(ctx context.Context, req *Request, size int) error {
	return g.opts.DB.InWorkspace(ctx, req.WorkspaceID, func(tx *gorm.DB) error {
		var same int64
		if err := tx.Model(&Request{}).Where("collapse_key = ? AND status = ?", req.CollapseKey, StatusPending).Limit(1).Count(&same).Error; err != nil {
			return fmt.Errorf("look for an identical request: %w", err)
		}
		if same > 0 {
			return gorm.ErrDuplicatedKey
		}
		if err := g.admit(tx, req.WorkspaceID, size); err != nil {
			return err
		}
		return tx.Create(req).Error
	})
}

// sizeText is a byte count as a person reads it.
func sizeText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
