package store

import (
	"context"
	"fmt"

	"github.com/tabbridge/tabbridge/secret"
)

// MachineTokenPrefix marks a machine token in logs and config files.
const MachineTokenPrefix = "tbm_"

// CreateMachine registers a machine for a person and returns its token,
// which is never stored or shown again.
func (db *DB) CreateMachine(ctx context.Context, userID, name string) (*Machine, string, error) {
	plain, hash := secret.New(MachineTokenPrefix)
	m := &Machine{ID: NewID(), UserID: userID, Name: name, TokenHash: hash, CreatedAt: Now()}
	if err := db.WithContext(ctx).Create(m).Error; err != nil {
		return nil, "", fmt.Errorf("create machine: %w", err)
	}
	return m, plain, nil
}

// Machines lists a person's machines that are not revoked, oldest first.
func (db *DB) Machines(ctx context.Context, userID string) ([]Machine, error) {
	out := []Machine{}
	err := db.WithContext(ctx).Where("user_id = ? AND revoked_at IS NULL", userID).Order("id").Find(&out).Error
	return out, err
}

// Machine finds one of a person's machines that is not revoked.
func (db *DB) Machine(ctx context.Context, userID, id string) (*Machine, error) {
	var m Machine
	err := db.WithContext(ctx).Where("id = ? AND user_id = ? AND revoked_at IS NULL", id, userID).Take(&m).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &m, nil
}

// RenameMachine renames one of a person's machines.
func (db *DB) RenameMachine(ctx context.Context, userID, id, name string) (*Machine, error) {
	res := db.WithContext(ctx).Model(&Machine{}).
		Where("id = ? AND user_id = ? AND revoked_at IS NULL", id, userID).Update("name", name)
	if err := affectedOne(res); err != nil {
		return nil, err
	}
	return db.Machine(ctx, userID, id)
}

// RevokeMachine revokes a machine's token: the daemon can no longer connect.
func (db *DB) RevokeMachine(ctx context.Context, userID, id string) error {
	return affectedOne(db.WithContext(ctx).Model(&Machine{}).
		Where("id = ? AND user_id = ? AND revoked_at IS NULL", id, userID).Update("revoked_at", Now()))
}

// MachineActive reports whether a machine's token is still good (not
// revoked): a daemon's socket admitted just before a revoke is closed when
// this says false.
func (db *DB) MachineActive(ctx context.Context, id string) (bool, error) {
	var ids []string
	err := db.WithContext(ctx).Model(&Machine{}).Where("id = ? AND revoked_at IS NULL", id).Limit(1).Pluck("id", &ids).Error
	return len(ids) > 0, err
}

// AuthenticateMachine resolves a presented machine token to its machine and
// records when it was last seen.
func (db *DB) AuthenticateMachine(ctx context.Context, token string) (*Machine, error) {
	var m Machine
	err := db.WithContext(ctx).Where("token_hash = ? AND revoked_at IS NULL", secret.Hash(token)).Take(&m).Error
	if err != nil {
		return nil, notFound(err)
	}
	if err := db.TouchMachine(ctx, m.ID); err != nil {
		return nil, err
	}
	return &m, nil
}

// TouchMachine records that a machine's daemon was connected just now.
func (db *DB) TouchMachine(ctx context.Context, id string) error {
	if err := db.WithContext(ctx).Model(&Machine{}).Where("id = ?", id).Update("last_seen_at", Now()).Error; err != nil {
		return fmt.Errorf("touch machine: %w", err)
	}
	return nil
}
