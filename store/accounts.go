package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/tabbridge/tabbridge/secret"
)

// ErrOwnerExists is returned when a first-run owner account is asked for but
// an account already exists.
var ErrOwnerExists = errors.New("store: owner account already exists")

// ErrTokenReused is returned when a refresh token that was already rotated is
// presented again; its whole family has been revoked.
var ErrTokenReused = errors.New("store: refresh token reused")

// ErrInvalidToken is returned for a refresh token or invitation that is
// unknown, expired, used or revoked.
var ErrInvalidToken = errors.New("store: invalid token")

// NormalizeEmail lowercases and trims an address so one person has one account.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// HasUsers reports whether any account exists (the first visit creates the owner).
func (db *DB) HasUsers(ctx context.Context) (bool, error) {
	var n int64
	if err := db.WithContext(ctx).Model(&User{}).Limit(1).Count(&n).Error; err != nil {
		return false, fmt.Errorf("count users: %w", err)
	}
	return n > 0, nil
}

// CreateOwner creates the first account, the owner, only while no account exists.
func (db *DB) CreateOwner(ctx context.Context, email, name, passwordHash string) (*User, error) {
	u := newUser(email, name, passwordHash)
	u.IsOwner = true
	err := db.txDirect(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&User{}).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return ErrOwnerExists
		}
		return tx.Create(u).Error
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil, ErrOwnerExists // another first visit won the race
	}
	if err != nil {
		return nil, fmt.Errorf("create owner: %w", err)
	}
	return u, nil
}

// CreateUser creates an ordinary account (open sign-up).
func (db *DB) CreateUser(ctx context.Context, email, name, passwordHash string) (*User, error) {
	u := newUser(email, name, passwordHash)
	if err := db.WithContext(ctx).Create(u).Error; err != nil {
		return nil, fmt.Errorf("create user: %w", notFound(err))
	}
	return u, nil
}

func newUser(email, name, passwordHash string) *User {
	now := Now()
	return &User{ID: NewID(), Email: NormalizeEmail(email), Name: name, PasswordHash: passwordHash, CreatedAt: now, UpdatedAt: now}
}

// UserByEmail finds an account by its address.
func (db *DB) UserByEmail(ctx context.Context, email string) (*User, error) {
	var u User
	if err := db.WithContext(ctx).Where("email = ?", NormalizeEmail(email)).Take(&u).Error; err != nil {
		return nil, notFound(err)
	}
	return &u, nil
}

// UserByID finds an account by id.
func (db *DB) UserByID(ctx context.Context, id string) (*User, error) {
	var u User
	if err := db.WithContext(ctx).Where("id = ?", id).Take(&u).Error; err != nil {
		return nil, notFound(err)
	}
	return &u, nil
}

// CreateInvitation stores a one-time invitation and returns its secret once.
func (db *DB) CreateInvitation(ctx context.Context, ownerID, note string, ttl time.Duration) (*Invitation, string, error) {
	return db.CreateInvitationUpTo(ctx, ownerID, note, ttl, 0)
}

// CreateInvitationUpTo is CreateInvitation refused (LimitError) while the
// person has max unused invitations (0: no cap; expired ones count, as the
// settings page lists them until withdrawn), counted and written holding
// the person (InUser).
func (db *DB) CreateInvitationUpTo(ctx context.Context, ownerID, note string, ttl time.Duration, max int) (*Invitation, string, error) {
	plain, hash := secret.New("tbi_")
	now := Now()
	inv := &Invitation{ID: NewID(), CreatedBy: ownerID, TokenHash: hash, Note: note, ExpiresAt: now.Add(ttl), CreatedAt: now}
	err := db.asPerson(ctx, ownerID, max, func(tx *gorm.DB) error {
		unused := tx.Model(&Invitation{}).Where("created_by = ? AND used_at IS NULL", ownerID)
		if err := roomFor(unused, LimitInvitations, max); err != nil {
			return err
		}
		return tx.Create(inv).Error
	})
	if err != nil {
		return nil, "", fmt.Errorf("create invitation: %w", err)
	}
	return inv, plain, nil
}

// Invitations lists the invitations a person created, newest first.
func (db *DB) Invitations(ctx context.Context, ownerID string) ([]Invitation, error) {
	var out []Invitation
	err := db.WithContext(ctx).Where("created_by = ?", ownerID).Order("id DESC").Find(&out).Error
	return out, err
}

// DeleteInvitation withdraws an unused invitation.
func (db *DB) DeleteInvitation(ctx context.Context, ownerID, id string) error {
	res := db.WithContext(ctx).Where("id = ? AND created_by = ? AND used_at IS NULL", id, ownerID).Delete(&Invitation{})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// AcceptInvitation spends an invitation and creates the account in one
// transaction: the invitation is marked used only if the account is created.
func (db *DB) AcceptInvitation(ctx context.Context, token, email, name, passwordHash string) (*User, error) {
	u := newUser(email, name, passwordHash)
	err := db.txDirect(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(u).Error; err != nil {
			return notFound(err)
		}
		res := tx.Model(&Invitation{}).
			Where("token_hash = ? AND used_at IS NULL AND expires_at > ?", secret.Hash(token), Now()).
			Updates(map[string]any{"used_at": Now(), "used_by": u.ID})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return ErrInvalidToken
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("accept invitation: %w", err)
	}
	return u, nil
}

// IssueRefresh starts a new refresh family (a fresh sign-in) and returns its
// first token and the family id.
func (db *DB) IssueRefresh(ctx context.Context, userID string, ttl time.Duration) (token, familyID string, err error) {
	return db.IssueRefreshFor(ctx, userID, "", ttl)
}

// IssueRefreshFor is IssueRefresh for a browser: its user agent is kept (cut
// to maxUserAgent bytes) with the sign-in, for the person's list of sign-ins.
func (db *DB) IssueRefreshFor(ctx context.Context, userID, userAgent string, ttl time.Duration) (token, familyID string, err error) {
	familyID = NewID()
	if len(userAgent) > maxUserAgent {
		userAgent = strings.ToValidUTF8(userAgent[:maxUserAgent], "")
	}
	err = db.txDirect(ctx, func(tx *gorm.DB) error {
		now := Now()
		if err := tx.Create(&SignIn{ID: familyID, UserID: userID, UserAgent: userAgent, CreatedAt: now, LastUsedAt: now}).Error; err != nil {
			return fmt.Errorf("record sign-in: %w", err)
		}
		token, err = issueRefresh(tx, userID, familyID, ttl)
		return err
	})
	return token, familyID, err
}

// maxUserAgent bounds the user agent kept per sign-in (browsers send ~150 bytes).
const maxUserAgent = 512

func issueRefresh(tx *gorm.DB, userID, familyID string, ttl time.Duration) (string, error) {
	plain, hash := secret.New("tbr_")
	now := Now()
	rt := &RefreshToken{ID: NewID(), UserID: userID, FamilyID: familyID, TokenHash: hash, ExpiresAt: now.Add(ttl), CreatedAt: now}
	if err := tx.Create(rt).Error; err != nil {
		return "", fmt.Errorf("issue refresh token: %w", err)
	}
	return plain, nil
}

// RotateRefresh spends a refresh token and returns its successor in the same
// family. A token that was already spent is reuse: the whole family is
// revoked and ErrTokenReused returned (with the family's id, so the caller
// can end what the sign-in opened), so a stolen copy dies with the original.
func (db *DB) RotateRefresh(ctx context.Context, token string, ttl time.Duration) (userID, familyID, next string, err error) {
	return db.RotateRefreshWithin(ctx, token, ttl, time.Time{})
}

// RotateRefreshWithin is RotateRefresh where a token spent after spentSince
// (the caller's now less its grace; zero for none) is not reuse: it yields
// another successor in the same family. Requests
// that left with the same cookie before its successor arrived (a page and
// its event stream, say) may reach different server instances, which cannot
// hand each other the successor (only its hash is stored); each gets its
// own, and the sign-in lives on. Past the grace, a spent token is reuse.
func (db *DB) RotateRefreshWithin(ctx context.Context, token string, ttl time.Duration, spentSince time.Time) (userID, familyID, next string, err error) {
	grace := !spentSince.IsZero()
	var rt RefreshToken
	if err := db.WithContext(ctx).Where("token_hash = ?", secret.Hash(token)).Take(&rt).Error; err != nil {
		return "", "", "", ErrInvalidToken
	}
	now := Now()
	if rt.RevokedAt != nil || !rt.ExpiresAt.After(now) {
		return "", "", "", ErrInvalidToken
	}
	if rt.UsedAt != nil && grace && rt.UsedAt.After(spentSince) {
		return db.sibling(ctx, rt, ttl)
	}
	if rt.UsedAt != nil {
		if err := db.RevokeFamily(ctx, rt.FamilyID); err != nil {
			return "", "", "", err
		}
		return "", rt.FamilyID, "", ErrTokenReused
	}
	err = db.txDirect(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&RefreshToken{}).Where("id = ? AND used_at IS NULL AND revoked_at IS NULL", rt.ID).Update("used_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return ErrTokenReused // a concurrent rotation spent it first
		}
		next, err = issueRefresh(tx, rt.UserID, rt.FamilyID, ttl)
		if err != nil {
			return err
		}
		return tx.Model(&SignIn{}).Where("id = ?", rt.FamilyID).Update("last_used_at", now).Error
	})
	if errors.Is(err, ErrTokenReused) && grace {
		return db.sibling(ctx, rt, ttl) // a concurrent rotation, this very moment
	}
	if errors.Is(err, ErrTokenReused) {
		_ = db.RevokeFamily(ctx, rt.FamilyID)
		return "", rt.FamilyID, "", ErrTokenReused
	}
	if err != nil {
		return "", "", "", fmt.Errorf("rotate refresh token: %w", err)
	}
	return rt.UserID, rt.FamilyID, next, nil
}

// sibling issues another successor of a token just spent, unless its
// family was revoked meanwhile.
func (db *DB) sibling(ctx context.Context, rt RefreshToken, ttl time.Duration) (userID, familyID, next string, err error) {
	if live, err := db.FamilyActive(ctx, rt.FamilyID); err != nil {
		return "", "", "", fmt.Errorf("rotate refresh token: %w", err)
	} else if !live {
		return "", "", "", ErrInvalidToken
	}
	next, err = issueRefresh(db.WithContext(ctx), rt.UserID, rt.FamilyID, ttl)
	if err != nil {
		return "", "", "", err
	}
	return rt.UserID, rt.FamilyID, next, nil
}

// RevokeFamily ends every token of one sign-in (sign-out, or detected reuse).
func (db *DB) RevokeFamily(ctx context.Context, familyID string) error {
	err := db.WithContext(ctx).Model(&RefreshToken{}).
		Where("family_id = ? AND revoked_at IS NULL", familyID).Update("revoked_at", Now()).Error
	if err != nil {
		return fmt.Errorf("revoke refresh family: %w", err)
	}
	return nil
}

// FamilyActive reports whether a sign-in's refresh family is still valid; an
// access token whose family was revoked is refused even before it expires.
// It runs on every request, so it asks for one row, not a count of the
// sign-in's whole chain of rotated tokens.
func (db *DB) FamilyActive(ctx context.Context, familyID string) (bool, error) {
	var ids []string
	err := db.WithContext(ctx).Model(&RefreshToken{}).
		Where("family_id = ? AND revoked_at IS NULL", familyID).Limit(1).Pluck("id", &ids).Error
	return len(ids) > 0, err
}

// SweepRefreshTokens deletes refresh tokens that can no longer do anything:
// expired ones, and those of ended sign-ins. Spent tokens of a live sign-in
// stay until they expire, since presenting one again is how reuse is caught;
// a deleted token is refused as unknown, as an expired or revoked one is.
func (db *DB) SweepRefreshTokens(ctx context.Context) (int64, error) {
	res := db.WithContext(ctx).Where("expires_at <= ? OR revoked_at IS NOT NULL", Now()).Delete(&RefreshToken{})
	if res.Error != nil {
		return 0, fmt.Errorf("sweep refresh tokens: %w", res.Error)
	}
	if err := db.WithContext(ctx).Where("id NOT IN (?)", db.Model(&RefreshToken{}).Select("family_id")).Delete(&SignIn{}).Error; err != nil {
		return 0, fmt.Errorf("sweep sign-ins: %w", err)
	}
	return res.RowsAffected, nil
}

// RevokeRefreshFamilyOf revokes the family a refresh token belongs to and
// returns its id; an unknown token is not an error (sign-out always
// succeeds) and gives "".
func (db *DB) RevokeRefreshFamilyOf(ctx context.Context, token string) (string, error) {
	var rt RefreshToken
	err := db.WithContext(ctx).Where("token_hash = ?", secret.Hash(token)).Take(&rt).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find refresh token: %w", err)
	}
	return rt.FamilyID, db.RevokeFamily(ctx, rt.FamilyID)
}

// SignIns lists userID's live sign-ins, most recently used first: those with
// a refresh token neither revoked nor expired.
func (db *DB) SignIns(ctx context.Context, userID string) ([]SignIn, error) {
	live := db.Model(&RefreshToken{}).Select("family_id").
		Where("user_id = ? AND revoked_at IS NULL AND expires_at > ?", userID, Now())
	var out []SignIn
	err := db.WithContext(ctx).Where("user_id = ? AND id IN (?)", userID, live).
		Order("last_used_at DESC").Order("id").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("list sign-ins: %w", err)
	}
	return out, nil
}

// EndSignIn revokes one of userID's sign-ins. ErrNotFound when it is not
// theirs or not live, alike.
func (db *DB) EndSignIn(ctx context.Context, userID, familyID string) error {
	res := db.WithContext(ctx).Model(&RefreshToken{}).
		Where("user_id = ? AND family_id = ? AND revoked_at IS NULL", userID, familyID).Update("revoked_at", Now())
	if res.Error != nil {
		return fmt.Errorf("end sign-in: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// SetPassword replaces userID's password hash and ends every other sign-in
// of theirs (all but keep, the family of the sign-in that changed it),
// returning the families it ended so their sockets can be closed too.
func (db *DB) SetPassword(ctx context.Context, userID, passwordHash, keep string) ([]string, error) {
	var ended []string
	err := db.txDirect(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&User{}).Where("id = ?", userID).Updates(map[string]any{"password_hash": passwordHash, "updated_at": Now()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNotFound
		}
		if err := tx.Model(&RefreshToken{}).Distinct("family_id").
			Where("user_id = ? AND family_id <> ? AND revoked_at IS NULL", userID, keep).Pluck("family_id", &ended).Error; err != nil {
			return err
		}
		return tx.Model(&RefreshToken{}).Where("user_id = ? AND family_id <> ? AND revoked_at IS NULL", userID, keep).
			Update("revoked_at", Now()).Error
	})
	if err != nil {
		return nil, fmt.Errorf("set password: %w", err)
	}
	return ended, nil
}
