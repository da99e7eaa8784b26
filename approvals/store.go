package approvals

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/tabbridge/tabbridge/store"
)

// Request is a question put to the person, as stored and as shown.
type Request struct {
	ID          string `json:"id"`
	UserID      string `json:"-"`
	WorkspaceID string `json:"workspaceId"`
	// TokenID is the agent token (or OAuth grant) whose call opened the
	// request ("" for rows from before it was recorded).
	TokenID   string     `json:"tokenId,omitempty"`
	TaskID    string     `json:"taskId"`
	Site      string     `json:"site"`
	Tool      string     `json:"tool"`
	Arguments string     `json:"arguments"` // pretty-printed JSON
	ArgsHash  string     `json:"-"`
	Status    string     `json:"status"`
	Answer    Answer     `json:"answer,omitempty"`
	DecidedBy string     `json:"decidedBy,omitempty"`
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	// WithdrawnReason says why a withdrawn request was withdrawn ("" for
	// other statuses, and for rows withdrawn before it was recorded).
	WithdrawnReason WithdrawReason `json:"withdrawnReason,omitempty"`
	// Consequential marks a tool annotated consequentialHint: it always
	// asks, and "Always allow" is refused (ErrNoStandingGrant).
	Consequential bool `json:"consequential,omitempty"`
	// Waiters counts the identical calls waiting on a pending request: Allow
	// once runs each of them.
	Waiters int `json:"waiters"`
	// AgentGoneAt is when the last call waiting on a pending request went
	// away; it is withdrawn a grace later unless an identical call rejoins.
	AgentGoneAt *time.Time `json:"agentGoneAt,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   time.Time  `json:"expiresAt"`
	// InstanceID is the server instance that opened it; CollapseKey, set
	// while it is pending, is unique among pending rows (identical calls on
	// any instance meet on one request).
	InstanceID  string  `json:"-"`
	CollapseKey *string `json:"-"`
	// ForgottenAt is when the person let a denied request's call be asked
	// again; until then an identical call in its task is refused without
	// asking (a remembered denial). Nil for other statuses.
	ForgottenAt *time.Time `json:"forgottenAt,omitempty"`
	// ToolTitle, ToolDescription and ToolInputSchema are the tool as the site
	// described it when the call asked, which its card shows: the page may
	// change or drop the tool while the request waits. All "" for rows from
	// before they were kept.
	ToolTitle       string `json:"-"`
	ToolDescription string `json:"-"`
	ToolInputSchema string `json:"-"`
}

// Remembered says whether the request is a denial that still refuses
// identical calls in its task without asking.
func (r Request) Remembered() bool { return r.Status == StatusDenied && r.ForgottenAt == nil }

// TableName is approval_requests.
func (Request) TableName() string { return "approval_requests" }

// Grant is a standing "Always allow <tool> on <site>" for one workspace.
type Grant struct {
	ID          string     `json:"id"`
	UserID      string     `json:"-"`
	WorkspaceID string     `json:"workspaceId"`
	Site        string     `json:"site"`
	Tool        string     `json:"tool"`
	CreatedBy   string     `json:"createdBy"`
	RequestID   string     `json:"requestId"`
	CreatedAt   time.Time  `json:"createdAt"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
}

type siteSetting struct {
	UserID    string `gorm:"primaryKey"`
	Origin    string `gorm:"primaryKey"`
	AskAll    bool
	UpdatedAt time.Time
}

func (siteSetting) TableName() string { return "site_settings" }

// Pending lists a person's requests still waiting, oldest first; taskID
// narrows them to one task when not empty.
func (g *Gate) Pending(ctx context.Context, ownerID, taskID string) ([]Request, error) {
	q := g.opts.DB.WithContext(ctx).Where("user_id = ? AND status = ?", ownerID, StatusPending)
	if taskID != "" {
		q = q.Where("task_id = ?", taskID)
	}
	out := []Request{}
	err := q.Order("id").Find(&out).Error
	return out, err
}

// PendingCount counts a person's requests still waiting (the badge).
func (g *Gate) PendingCount(ctx context.Context, ownerID string) (int, error) {
	var n int64
	err := g.opts.DB.WithContext(ctx).Model(&Request{}).Where("user_id = ? AND status = ?", ownerID, StatusPending).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count pending requests: %w", err)
	}
	return int(n), nil
}

// Request returns one request of the person's, pending or ended;
// ErrNotFound for one that does not exist or is another's.
func (g *Gate) Request(ctx context.Context, ownerID, requestID string) (Request, error) {
	var r Request
	if err := g.opts.DB.WithContext(ctx).Where("id = ? AND user_id = ?", requestID, ownerID).Take(&r).Error; err != nil {
		return Request{}, ErrNotFound
	}
	return r, nil
}

// TaskRequests lists every request of one task of the person's, oldest first.
func (g *Gate) TaskRequests(ctx context.Context, ownerID, taskID string) ([]Request, error) {
	out := []Request{}
	err := g.opts.DB.WithContext(ctx).Where("user_id = ? AND task_id = ?", ownerID, taskID).Order("id").Find(&out).Error
	return out, err
}

// Grants lists a person's live grants.
func (g *Gate) Grants(ctx context.Context, ownerID string) ([]Grant, error) {
	out := []Grant{}
	err := g.opts.DB.WithContext(ctx).Where("user_id = ? AND revoked_at IS NULL", ownerID).Order("id").Find(&out).Error
	return out, err
}

// RevokeGrant ends a grant of the person's; the next such call asks again.
func (g *Gate) RevokeGrant(ctx context.Context, ownerID, grantID string) error {
	res := g.opts.DB.WithContext(ctx).Model(&Grant{}).
		Where("id = ? AND user_id = ? AND revoked_at IS NULL", grantID, ownerID).Update("revoked_at", store.Now())
	if res.Error != nil {
		return fmt.Errorf("revoke grant: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// grant makes the grant an "Always allow" answer asked for, only while the site is still shared
// with the request's workspace, in one statement. The answer settles the request first, and the
// person may stop sharing the site (or move it) in between: that revokes the workspace's grants,
// and a grant made just after it would come back to life if they shared the site again. On
// PostgreSQL the statement also locks the share row, so an unshare's delete (or a move's update)
// waits for it, and the revocation that follows sees the grant. SQLite runs one writer at a time.
func (g *Gate) grant(ctx context.Context, r Request, by string) error {
	lock := ""
	if g.opts.DB.Postgres {
		lock = " FOR SHARE"
	}
	err := g.opts.DB.WithContext(ctx).Exec(`INSERT INTO grants (id, user_id, workspace_id, site, tool, created_by, request_id, created_at)
		SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (
			SELECT 1 FROM shared_sites WHERE user_id = ? AND workspace_id = ? AND origin = ?`+lock+`)`,
		store.NewID(), r.UserID, r.WorkspaceID, r.Site, r.Tool, by, r.ID, store.Now(), r.UserID, r.WorkspaceID, r.Site).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil // already always allowed
	}
	if err != nil {
		return fmt.Errorf("create grant: %w", err)
	}
	return nil
}

func (g *Gate) liveGrant(ctx context.Context, workspaceID, site, tool string) (*Grant, error) {
	var gr Grant
	err := g.opts.DB.WithContext(ctx).Where("workspace_id = ? AND site = ? AND tool = ? AND revoked_at IS NULL", workspaceID, site, tool).
		Limit(1).Find(&gr).Error
	if err != nil {
		return nil, fmt.Errorf("find grant: %w", err)
	}
	if gr.ID == "" {
		return nil, nil
	}
	return &gr, nil
}

// askAllTTL bounds how long a cached "ask for every tool" setting is
// trusted. Another instance's change clears it at once (ForgetAskAll,
// through the signal bus) and nothing is trusted while the bus is down
// (Options.Trusted); the TTL is a backstop.
const askAllTTL = 30 * time.Second

// ForgetAskAll drops the cached "ask for every tool" settings: another
// instance changed one, or its signals may have been missed.
func (g *Gate) ForgetAskAll() { g.askAll.Clear() }

type askAllEntry struct {
	on bool
	at time.Time
}

// AskAll reports whether the person wants every tool of a site asked about.
// It is read on every read-only call, so it is cached briefly.
func (g *Gate) AskAll(ctx context.Context, ownerID, origin string) (bool, error) {
	key := ownerID + "\x00" + origin
	trusted := g.opts.Trusted == nil || g.opts.Trusted()
	if v, ok := g.askAll.Load(key); ok && trusted && time.Since(v.(askAllEntry).at) < askAllTTL {
		return v.(askAllEntry).on, nil
	}
	var s siteSetting
	err := g.opts.DB.WithContext(ctx).Where("user_id = ? AND origin = ?", ownerID, origin).Limit(1).Find(&s).Error
	if err != nil {
		return false, fmt.Errorf("read site setting: %w", err)
	}
	g.askAll.Store(key, askAllEntry{on: s.AskAll, at: time.Now()})
	return s.AskAll, nil
}

// SetAskAll sets the per-site "ask for every tool" setting.
func (g *Gate) SetAskAll(ctx context.Context, ownerID, origin string, on bool) error {
	s := siteSetting{UserID: ownerID, Origin: origin, AskAll: on, UpdatedAt: store.Now()}
	err := g.opts.DB.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&s).Error
	if err != nil {
		return fmt.Errorf("save site setting: %w", err)
	}
	g.askAll.Store(ownerID+"\x00"+origin, askAllEntry{on: on, at: time.Now()})
	return nil
}

// EndTask withdraws the requests waiting in a task that was just set to
// completed or rejected: its calls are told, and the person is not asked.
func (g *Gate) EndTask(ctx context.Context, ownerID, taskID string) error {
	_, err := g.withdrawWhere(ctx, WithdrawTaskFinished, "user_id = ? AND task_id = ?", ownerID, taskID)
	return err
}

// ForgetSite is called when the person stops sharing a site with
// workspaceID ("" for every workspace), by unsharing it or moving it to
// another workspace: the workspace's grants on it are revoked (sharing it
// again starts from asking), its requests waiting on it are withdrawn,
// since no call of that workspace may run there now, and its remembered
// denials are forgotten.
func (g *Gate) ForgetSite(ctx context.Context, ownerID, workspaceID, origin string) error {
	q := g.opts.DB.WithContext(ctx).Model(&Grant{}).Where("user_id = ? AND site = ? AND revoked_at IS NULL", ownerID, origin)
	if workspaceID != "" {
		q = q.Where("workspace_id = ?", workspaceID)
	}
	if err := q.Update("revoked_at", store.Now()).Error; err != nil {
		return fmt.Errorf("revoke site grants: %w", err)
	}
	cond := "user_id = ? AND site = ?"
	args := []any{ownerID, origin}
	if workspaceID != "" {
		cond += " AND workspace_id = ?"
		args = append(args, workspaceID)
	}
	if _, err := g.withdrawWhere(ctx, WithdrawUnshared, cond, args...); err != nil {
		return err
	}
	// Its remembered denials go too: sharing it again starts from asking.
	err := g.opts.DB.WithContext(ctx).Model(&Request{}).Where(cond+" AND status = ? AND forgotten_at IS NULL", append(args, StatusDenied)...).
		Update("forgotten_at", store.Now()).Error
	if err != nil {
		return fmt.Errorf("forget site denials: %w", err)
	}
	return nil
}
