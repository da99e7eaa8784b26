// Package tickets issues and redeems the short-lived, single-use tickets that
// let a browser open a WebSocket: a socket from an extension's service worker
// carries no cookies, so the worker first trades its sign-in cookie for a
// ticket and then dials with the ticket in the query string.
//
// A ticket is 256 random bits, stored only as a hash, valid for TTL, bound to
// one person and one purpose (and, for a terminal viewer, one subject such as
// a session id). Redeeming is one atomic UPDATE, so of many concurrent redeems
// of one ticket exactly one wins. It knows nothing of HTTP.
package tickets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tabbridge/tabbridge/secret"
	"github.com/tabbridge/tabbridge/store"
)

// TTL is how long a ticket stays valid.
const TTL = 60 * time.Second

// Purposes a ticket can be bound to.
const (
	PurposeExtension = "extension"
	PurposeViewer    = "viewer"
)

// ErrInvalid is returned for a ticket that is unknown, already used, expired,
// or bound to another purpose or subject. The reasons are not told apart to the
// caller: each is "this ticket does not open this door".
var ErrInvalid = errors.New("tickets: invalid, used or expired ticket")

// ErrSignedOut is returned for a ticket that would still be good but whose
// sign-in has ended (signed out, or revoked for a reused refresh token):
// what the sign-in could open ends with it, including what it was about to.
var ErrSignedOut = errors.New("tickets: the sign-in that asked for this ticket has ended")

// Ticket is what a redeem returns: whose ticket it was and what it was for.
type Ticket struct {
	ID        string
	UserID    string
	FamilyID  string // the sign-in that asked for it: what it opens ends with that sign-in
	Purpose   string
	Subject   string
	ExpiresAt time.Time
	UsedAt    *time.Time
	TokenHash string
	CreatedAt time.Time
}

// Issuer issues and redeems tickets in the database.
type Issuer struct {
	db  *store.DB
	now func() time.Time
}

// New returns an Issuer on db; now is the clock (store.Now when nil).
func New(db *store.DB, now func() time.Time) *Issuer {
	if now == nil {
		now = store.Now
	}
	return &Issuer{db: db, now: now}
}

// MaxUnspent is how many tickets one person may hold unspent and unexpired
// at once, of every purpose. An honest browser spends each ticket within a
// second of asking (an extension's socket, a terminal viewer), so it holds
// one or two; without a bound a sign-in could ask for tickets in a loop and
// make the server keep a row of each for a minute.
const MaxUnspent = 100

// ErrTooMany refuses a ticket to a person who holds MaxUnspent.
var ErrTooMany = errors.New("tickets: too many unspent tickets")

// Issue creates a ticket for userID's sign-in familyID and purpose (and
// subject, "" when the purpose has none) and returns its secret and expiry.
// ErrTooMany when the person already holds MaxUnspent; the count and the
// insert are two statements, so requests racing past the count can each
// add one: the bound is MaxUnspent plus what arrives at the same moment.
func (is *Issuer) Issue(ctx context.Context, userID, familyID, purpose, subject string) (string, time.Time, error) {
	plain, hash := secret.New("tbt_")
	now := is.now()
	var held int64
	err := is.db.WithContext(ctx).Model(&Ticket{}).
		Where("user_id = ? AND used_at IS NULL AND expires_at > ?", userID, now).Count(&held).Error
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issue ticket: %w", err)
	}
	if held >= MaxUnspent {
		return "", time.Time{}, ErrTooMany
	}
	t := &Ticket{ID: store.NewID(), UserID: userID, FamilyID: familyID, Purpose: purpose, Subject: subject, TokenHash: hash, ExpiresAt: now.Add(TTL), CreatedAt: now}
	if err := is.db.WithContext(ctx).Create(t).Error; err != nil {
		return "", time.Time{}, fmt.Errorf("issue ticket: %w", err)
	}
	return plain, t.ExpiresAt, nil
}

// Redeem spends a ticket for purpose in one atomic statement and returns it.
// A used, expired, unknown or wrong-purpose ticket gives ErrInvalid; a ticket
// whose sign-in has ended gives ErrSignedOut and stays unspent. The sign-in
// is checked in the same statement, but a sign-out may still land just after
// it: whoever holds the socket the ticket opens must also follow the sign-in
// (register, then check again) to close it.
func (is *Issuer) Redeem(ctx context.Context, plain, purpose string) (*Ticket, error) {
	hash := secret.Hash(plain)
	db := is.db.WithContext(ctx)
	now := is.now()
	live := db.Model(&store.RefreshToken{}).Select("1").
		Where("refresh_tokens.family_id = tickets.family_id AND refresh_tokens.revoked_at IS NULL")
	res := db.Model(&Ticket{}).
		Where("token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?", hash, purpose, now).
		Where("family_id = '' OR EXISTS (?)", live).
		Update("used_at", now)
	if res.Error != nil {
		return nil, fmt.Errorf("redeem ticket: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return nil, is.whyNot(ctx, hash, purpose, now)
	}
	var t Ticket
	if err := db.Where("token_hash = ?", hash).Take(&t).Error; err != nil {
		return nil, fmt.Errorf("redeem ticket: %w", err)
	}
	return &t, nil
}

// whyNot tells a ticket that would still be good, but whose sign-in ended,
// from one that opens nothing at all.
func (is *Issuer) whyNot(ctx context.Context, hash, purpose string, now time.Time) error {
	var n int64
	err := is.db.WithContext(ctx).Model(&Ticket{}).
		Where("token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?", hash, purpose, now).Count(&n).Error
	if err != nil {
		return fmt.Errorf("redeem ticket: %w", err)
	}
	if n > 0 {
		return ErrSignedOut
	}
	return ErrInvalid
}

// Sweep deletes tickets that expired before now, used or not.
func (is *Issuer) Sweep(ctx context.Context) (int64, error) {
	res := is.db.WithContext(ctx).Where("expires_at <= ?", is.now()).Delete(&Ticket{})
	if res.Error != nil {
		return 0, fmt.Errorf("sweep tickets: %w", res.Error)
	}
	return res.RowsAffected, nil
}
