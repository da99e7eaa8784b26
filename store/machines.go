package store

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/secret"
)

// MachineTokenPrefix marks a machine token in logs and config files.
const MachineTokenPrefix = "tbm_"

// CreateMachine registers a machine for a person and returns its token,
// which is never stored or shown again.
func (db *DB) CreateMachine(ctx context.Context, userID, name string) (*Machine, string, error) {
	return db.CreateMachineUpTo(ctx, userID, name, 0)
}

// CreateMachineUpTo is CreateMachine refused (LimitError) while the person
// has max machines not revoked (0: no cap), counted and written holding the
// person (InUser).
func (db *DB) CreateMachineUpTo(ctx context.Context, userID, name string, max int) (*Machine, string, error) {
	plain, hash := secret.New(MachineTokenPrefix)
	m := &Machine{ID: NewID(), UserID: userID, Name: name, TokenHash: hash, CreatedAt: Now()}
	err := db.asPerson(ctx, userID, max, func(tx *gorm.DB) error {
		live := tx.Model(&Machine{}).Where("user_id = ? AND revoked_at IS NULL", userID)
		if err := roomFor(live, LimitMachines, max); err != nil {
			return err
		}
		return tx.Create(m).Error
	})
	if err != nil {
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

// ErrOtherInstall is returned by ClaimMachine when the token is presented
// by a daemon of another install than the one that first linked with it: a
// copied token must not take over the person's terminals.
var ErrOtherInstall = errors.New("store: machine token belongs to another install")

// MachineActive reports whether a machine's token is still good (not
// revoked): a daemon's socket admitted just before a revoke is closed when
// this says false.
func (db *DB) MachineActive(ctx context.Context, id string) (bool, error) {
	var ids []string
	err := db.WithContext(ctx).Model(&Machine{}).Where("id = ? AND revoked_at IS NULL", id).Limit(1).Pluck("id", &ids).Error
	return len(ids) > 0, err
}

// AuthenticateMachine resolves a presented machine token to its machine.
// Before the daemon is linked, ClaimMachine must accept its install (and
// records that the machine was seen).
func (db *DB) AuthenticateMachine(ctx context.Context, token string) (*Machine, error) {
	var m Machine
	err := db.WithContext(ctx).Where("token_hash = ? AND revoked_at IS NULL", secret.Hash(token)).Take(&m).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &m, nil
}

// ClaimMachine admits the daemon install that presents the machine's token
// and records that the machine was seen. The first install to link claims
// the machine; another install is refused with ErrOtherInstall, the attempt
// recorded in m.OtherInstallAt (and the database) for the person to see.
func (db *DB) ClaimMachine(ctx context.Context, m *Machine, installID string) error {
	install := secret.Hash(installID)
	// One statement claims an unclaimed machine or matches its own
	// install, so two first links racing cannot both win.
	res := db.WithContext(ctx).Model(&Machine{}).
		Where("id = ? AND revoked_at IS NULL AND (install_hash IS NULL OR install_hash = ?)", m.ID, install).
		Updates(map[string]any{"install_hash": install, "last_seen_at": Now()})
	if res.Error != nil {
		return fmt.Errorf("claim machine: %w", res.Error)
	}
	if res.RowsAffected == 1 {
		m.InstallHash = &install
		return nil
	}
	now := Now()
	res = db.WithContext(ctx).Model(&Machine{}).Where("id = ? AND revoked_at IS NULL", m.ID).Update("other_install_at", now)
	if err := affectedOne(res); err != nil {
		return err // revoked meanwhile: ErrNotFound
	}
	m.OtherInstallAt = &now
	return ErrOtherInstall
}

// TouchMachine records that a machine's daemon was connected just now.
func (db *DB) TouchMachine(ctx context.Context, id string) error {
	if err := db.WithContext(ctx).Model(&Machine{}).Where("id = ?", id).Update("last_seen_at", Now()).Error; err != nil {
		return fmt.Errorf("touch machine: %w", err)
	}
	return nil
}
