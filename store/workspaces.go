package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/secret"
)

// Workspaces lists a person's workspaces, oldest first.
func (db *DB) Workspaces(ctx context.Context, ownerID string) ([]Workspace, error) {
	out := []Workspace{}
	err := db.WithContext(ctx).Where("owner_id = ?", ownerID).Order("id").Find(&out).Error
	return out, err
}

// Workspace finds one of a person's workspaces.
func (db *DB) Workspace(ctx context.Context, ownerID, id string) (*Workspace, error) {
	var w Workspace
	if err := db.WithContext(ctx).Where("id = ? AND owner_id = ?", id, ownerID).Take(&w).Error; err != nil {
		return nil, notFound(err)
	}
	return &w, nil
}

// CreateWorkspace makes a workspace owned by ownerID, with no cap.
func (db *DB) CreateWorkspace(ctx context.Context, ownerID, name string) (*Workspace, error) {
	return db.CreateWorkspaceUpTo(ctx, ownerID, name, 0)
}

// CreateWorkspaceUpTo is CreateWorkspace refused (LimitError) while the
// person has max workspaces (0: no cap), counted and written holding the
// person (InUser), so the cap holds however many instances create at once.
func (db *DB) CreateWorkspaceUpTo(ctx context.Context, ownerID, name string, max int) (*Workspace, error) {
	now := Now()
	w := &Workspace{ID: NewID(), OwnerID: ownerID, Name: name, CreatedAt: now, UpdatedAt: now}
	err := db.asPerson(ctx, ownerID, max, func(tx *gorm.DB) error {
		if err := roomFor(tx.Model(&Workspace{}).Where("owner_id = ?", ownerID), LimitWorkspaces, max); err != nil {
			return err
		}
		return tx.Create(w).Error
	})
	if err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	return w, nil
}

// RenameWorkspace renames one of a person's workspaces.
func (db *DB) RenameWorkspace(ctx context.Context, ownerID, id, name string) (*Workspace, error) {
	res := db.WithContext(ctx).Model(&Workspace{}).Where("id = ? AND owner_id = ?", id, ownerID).
		Updates(map[string]any{"name": name, "updated_at": Now()})
	if err := affectedOne(res); err != nil {
		return nil, err
	}
	return db.Workspace(ctx, ownerID, id)
}

// DeleteWorkspace deletes a workspace with its tokens and tasks.
func (db *DB) DeleteWorkspace(ctx context.Context, ownerID, id string) error {
	defer db.agents.clear()
	defer db.sites.clear()
	defer db.oauth.clear()
	return affectedOne(db.WithContext(ctx).Where("id = ? AND owner_id = ?", id, ownerID).Delete(&Workspace{}))
}

// AgentTokens lists a workspace's live tokens; the workspace must be the person's.
func (db *DB) AgentTokens(ctx context.Context, ownerID, workspaceID string) ([]AgentToken, error) {
	if _, err := db.Workspace(ctx, ownerID, workspaceID); err != nil {
		return nil, err
	}
	out := []AgentToken{}
	err := db.WithContext(ctx).Where("workspace_id = ? AND revoked_at IS NULL", workspaceID).Order("id").Find(&out).Error
	return out, err
}

// CreateAgentToken makes a token for one of a person's workspaces and returns
// its secret, which is never stored or shown again.
func (db *DB) CreateAgentToken(ctx context.Context, ownerID, workspaceID, name string) (*AgentToken, string, error) {
	return db.CreateAgentTokenUntil(ctx, ownerID, workspaceID, name, nil)
}

// CreateAgentTokenUntil is CreateAgentToken for a token that stops working
// at expires (nil: never).
func (db *DB) CreateAgentTokenUntil(ctx context.Context, ownerID, workspaceID, name string, expires *time.Time) (*AgentToken, string, error) {
	return db.CreateAgentTokenUpTo(ctx, ownerID, workspaceID, name, expires, 0)
}

// CreateAgentTokenUpTo is CreateAgentTokenUntil refused (LimitError) while
// the workspace has max tokens not revoked (0: no cap; expired ones count,
// as its page lists them until revoked), counted and written holding the
// workspace (InWorkspace).
func (db *DB) CreateAgentTokenUpTo(ctx context.Context, ownerID, workspaceID, name string, expires *time.Time, max int) (*AgentToken, string, error) {
	if _, err := db.Workspace(ctx, ownerID, workspaceID); err != nil {
		return nil, "", err
	}
	plain, hash := secret.New("tba_")
	t := &AgentToken{ID: NewID(), WorkspaceID: workspaceID, Name: name, TokenHash: hash, CreatedAt: Now(), ExpiresAt: expires}
	err := db.inWorkspaceUpTo(ctx, workspaceID, max, func(tx *gorm.DB) error {
		live := tx.Model(&AgentToken{}).Where("workspace_id = ? AND revoked_at IS NULL", workspaceID)
		if err := roomFor(live, LimitAgentTokens, max); err != nil {
			return err
		}
		return tx.Create(t).Error
	})
	if err != nil {
		return nil, "", fmt.Errorf("create agent token: %w", err)
	}
	return t, plain, nil
}

// RevokeAgentToken revokes a token of one of a person's workspaces.
func (db *DB) RevokeAgentToken(ctx context.Context, ownerID, workspaceID, id string) error {
	defer db.agents.clear()
	if _, err := db.Workspace(ctx, ownerID, workspaceID); err != nil {
		return err
	}
	return affectedOne(db.WithContext(ctx).Model(&AgentToken{}).
		Where("id = ? AND workspace_id = ? AND revoked_at IS NULL", id, workspaceID).Update("revoked_at", Now()))
}

// AgentActive reports whether an agent's credential still stands: id is a
// pasted token's or an OAuth grant's (AgentIdentity.TokenID), and it stands
// until it is revoked or deleted with its workspace. Expiry is not asked: a
// call a token began before its expiry date may finish.
func (db *DB) AgentActive(ctx context.Context, id string) (bool, error) {
	var ids []string
	err := db.WithContext(ctx).Raw(`SELECT id FROM agent_tokens WHERE id = ? AND revoked_at IS NULL
		UNION ALL SELECT id FROM oauth_grants WHERE id = ? AND revoked_at IS NULL`, id, id).Scan(&ids).Error
	return len(ids) > 0, err
}

// WorkspaceAgents lists the ids of a workspace's standing agent credentials:
// its pasted tokens and its OAuth grants.
func (db *DB) WorkspaceAgents(ctx context.Context, workspaceID string) ([]string, error) {
	var ids []string
	err := db.WithContext(ctx).Raw(`SELECT id FROM agent_tokens WHERE workspace_id = ? AND revoked_at IS NULL
		UNION ALL SELECT id FROM oauth_grants WHERE workspace_id = ? AND revoked_at IS NULL`, workspaceID, workspaceID).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("workspace agents: %w", err)
	}
	return ids, nil
}

// AgentIdentity is who an agent token speaks for.
type AgentIdentity struct {
	TokenID   string // the pasted token's id, or the OAuth grant's
	Workspace Workspace
	// FirstUse is true on the answer to the token's first request ever, for
	// the operator's log; cached answers never carry it.
	FirstUse bool
	Grant    bool // TokenID is an OAuth grant's id
	// ExpiresAt is when a pasted token stops working (nil: never).
	ExpiresAt *time.Time
}

// agentTouchEvery is how stale a token's last-used time may get: recording
// every request would be a write per MCP message.
const agentTouchEvery = time.Minute

// AuthenticateAgent resolves a presented agent token to its workspace and
// records when it was last used (to the minute).
func (db *DB) AuthenticateAgent(ctx context.Context, token string) (*AgentIdentity, error) {
	hash := secret.Hash(token)
	if id, ok := db.agents.get(hash); ok {
		if id.ExpiresAt != nil && !Now().Before(*id.ExpiresAt) {
			return nil, ErrTokenExpired
		}
		return &id, nil
	}
	var row struct {
		AgentToken
		WName      string
		WOwnerID   string
		WCreatedAt time.Time
		WUpdatedAt time.Time
	}
	err := db.WithContext(ctx).Table("agent_tokens").
		Select("agent_tokens.*, workspaces.name AS w_name, workspaces.owner_id AS w_owner_id, workspaces.created_at AS w_created_at, workspaces.updated_at AS w_updated_at").
		Joins("JOIN workspaces ON workspaces.id = agent_tokens.workspace_id").
		Where("agent_tokens.token_hash = ? AND agent_tokens.revoked_at IS NULL", hash).Take(&row).Error
	if err != nil {
		return nil, notFound(err)
	}
	now := Now()
	if row.Expired(now) {
		return nil, ErrTokenExpired
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) > agentTouchEvery {
		if err := db.WithContext(ctx).Model(&AgentToken{}).Where("id = ?", row.ID).Update("last_used_at", now).Error; err != nil {
			return nil, fmt.Errorf("touch agent token: %w", err)
		}
	}
	w := Workspace{ID: row.WorkspaceID, OwnerID: row.WOwnerID, Name: row.WName, CreatedAt: row.WCreatedAt, UpdatedAt: row.WUpdatedAt}
	id := AgentIdentity{TokenID: row.ID, Workspace: w, ExpiresAt: row.ExpiresAt}
	db.agents.put(hash, id)
	id.FirstUse = row.LastUsedAt == nil
	return &id, nil
}

// Tasks lists up to limit of a workspace's tasks, newest first, older than
// the task before ("" from the newest); the workspace must be the person's.
func (db *DB) Tasks(ctx context.Context, ownerID, workspaceID, before string, limit int) ([]Task, error) {
	if _, err := db.Workspace(ctx, ownerID, workspaceID); err != nil {
		return nil, err
	}
	return db.WorkspaceTasks(ctx, workspaceID, before, limit)
}

// WorkspaceTasks is Tasks for a caller already scoped to the workspace (an
// agent token's). Task ids are UUIDv7, so their order is their age.
func (db *DB) WorkspaceTasks(ctx context.Context, workspaceID, before string, limit int) ([]Task, error) {
	out := []Task{}
	q := db.WithContext(ctx).Where("workspace_id = ?", workspaceID)
	if before != "" {
		q = q.Where("id < ?", before)
	}
	err := q.Order("id DESC").Limit(limit).Find(&out).Error
	return out, err
}

// Task finds a task in one of a person's workspaces.
func (db *DB) Task(ctx context.Context, ownerID, id string) (*Task, error) {
	var t Task
	err := db.WithContext(ctx).Joins("JOIN workspaces ON workspaces.id = tasks.workspace_id").
		Where("tasks.id = ? AND workspaces.owner_id = ?", id, ownerID).Take(&t).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &t, nil
}

// WorkspaceTask finds a task only if it belongs to the given workspace.
func (db *DB) WorkspaceTask(ctx context.Context, workspaceID, id string) (*Task, error) {
	var t Task
	if err := db.WithContext(ctx).Where("id = ? AND workspace_id = ?", id, workspaceID).Take(&t).Error; err != nil {
		return nil, notFound(err)
	}
	return &t, nil
}

// TooManyOpenTasksError refuses a task that would open one more in a
// workspace already at its cap (NewTask.OpenMax, TaskChange.OpenMax).
type TooManyOpenTasksError struct {
	Open int64 // the workspace's open tasks when the change was refused
}

func (e *TooManyOpenTasksError) Error() string {
	return fmt.Sprintf("store: the workspace already has %d open tasks", e.Open)
}

// NewTask is a task CreateTask adds.
type NewTask struct {
	WorkspaceID string
	Title       string
	Status      string // "" is notstarted
	CreatedBy   string // a user id or "agent:<token id>"
	// OpenMax refuses an open task (TooManyOpenTasksError) while the
	// workspace has this many open; 0 is no cap.
	OpenMax int
}

// CreateTask adds a task to a workspace. An open one under a cap is counted
// and written in one transaction that holds the workspace (InWorkspace), so
// the cap holds however many server instances create at once.
func (db *DB) CreateTask(ctx context.Context, n NewTask) (*Task, error) {
	status := n.Status
	if status == "" {
		status = "notstarted"
	}
	now := Now()
	t := &Task{ID: NewID(), WorkspaceID: n.WorkspaceID, Title: n.Title, Status: status, CreatedBy: n.CreatedBy, CreatedAt: now, UpdatedAt: now}
	if n.OpenMax == 0 || !TaskOpen(status) {
		if err := db.WithContext(ctx).Create(t).Error; err != nil {
			return nil, fmt.Errorf("create task: %w", err)
		}
		return t, nil
	}
	err := db.InWorkspace(ctx, n.WorkspaceID, func(tx *gorm.DB) error {
		if err := roomForOpenTask(tx, n.WorkspaceID, n.OpenMax); err != nil {
			return err
		}
		return tx.Create(t).Error
	})
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	return t, nil
}

// TaskChange is what UpdateTask changes; an empty title or status is left
// alone.
type TaskChange struct {
	Title  string
	Status string
	// OpenMax refuses reopening a finished task (TooManyOpenTasksError)
	// while the workspace has this many open; 0 is no cap.
	OpenMax int
	// Allow, when set, is given the task's status before a status change,
	// inside the change's transaction, and refuses the change by returning
	// an error, which UpdateTask returns as it is. It must not use the
	// database (on SQLite the transaction holds the only connection).
	Allow func(from string) error
}

// UpdateTask changes a task of a workspace. A status change reads the task,
// checks it and writes it in one transaction that holds the workspace
// (InWorkspace): reopening a finished task opens one more under the cap, and
// Allow judges the status no other change can move meanwhile.
func (db *DB) UpdateTask(ctx context.Context, workspaceID, id string, c TaskChange) (*Task, error) {
	set := map[string]any{"updated_at": Now()}
	if c.Title != "" {
		set["title"] = c.Title
	}
	if c.Status == "" {
		res := db.WithContext(ctx).Model(&Task{}).Where("id = ? AND workspace_id = ?", id, workspaceID).Updates(set)
		if err := affectedOne(res); err != nil {
			return nil, err
		}
		return db.WorkspaceTask(ctx, workspaceID, id)
	}
	set["status"] = c.Status
	var t Task
	err := db.InWorkspace(ctx, workspaceID, func(tx *gorm.DB) error {
		if err := tx.Where("id = ? AND workspace_id = ?", id, workspaceID).Take(&t).Error; err != nil {
			return notFound(err)
		}
		if c.Allow != nil {
			if err := c.Allow(t.Status); err != nil {
				return err
			}
		}
		if c.OpenMax != 0 && TaskOpen(c.Status) && !TaskOpen(t.Status) {
			if err := roomForOpenTask(tx, workspaceID, c.OpenMax); err != nil {
				return err
			}
		}
		if err := tx.Model(&Task{}).Where("id = ? AND workspace_id = ?", id, workspaceID).Updates(set).Error; err != nil {
			return err
		}
		return tx.Where("id = ? AND workspace_id = ?", id, workspaceID).Take(&t).Error
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// InWorkspace runs fn in a transaction that first takes the workspace's
// write lock, so a count of the workspace's rows and the write it allows
// (its open tasks here; its pending approval requests in the approvals
// package) run one at a time on every instance sharing the database, and a
// cap counted in fn holds. The lock is a write that changes nothing: on
// PostgreSQL it locks the workspace's row until the end of the transaction;
// on SQLite it takes the database's write lock at once, so no transaction
// reads first and then fails to upgrade. fn must use only tx (txDirect); fn's
// error is returned as it is. ErrNotFound when the workspace does not exist.
func (db *DB) InWorkspace(ctx context.Context, workspaceID string, fn func(tx *gorm.DB) error) error {
	return db.txDirect(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE workspaces SET updated_at = updated_at WHERE id = ?", workspaceID)
		if err := affectedOne(res); err != nil {
			return err
		}
		return fn(tx)
	})
}

// roomForOpenTask refuses one more open task in a workspace with openMax
// open; tx holds the workspace (InWorkspace).
func roomForOpenTask(tx *gorm.DB, workspaceID string, openMax int) error {
	var n int64
	err := tx.Model(&Task{}).Where("workspace_id = ? AND status IN ?", workspaceID, openTaskStatuses).Count(&n).Error
	if err != nil {
		return err
	}
	if n >= int64(openMax) {
		return &TooManyOpenTasksError{Open: n}
	}
	return nil
}

func affectedOne(res *gorm.DB) error {
	if res.Error != nil {
		return notFound(res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}
