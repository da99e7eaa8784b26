package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// OAuthClient is a client registered dynamically (RFC 7591). Clients that
// identify themselves by a metadata document URL are not stored.
type OAuthClient struct {
	ID           string
	Name         string
	RedirectURIs string // newline-separated
	CreatedAt    time.Time
}

// Redirects returns the client's registered redirect URIs.
func (c *OAuthClient) Redirects() []string { return strings.Split(c.RedirectURIs, "\n") }

// OAuthGrant is one client's authorization to act for one workspace: an
// agent of the workspace, shown beside its pasted tokens.
type OAuthGrant struct {
	ID          string     `json:"id"`
	UserID      string     `json:"-"`
	WorkspaceID string     `json:"workspaceId"`
	ClientID    string     `json:"clientId"`
	ClientName  string     `json:"clientName"`
	ClientHost  string     `json:"clientHost"`
	Scope       string     `json:"scope"`
	Resource    string     `json:"resource"`
	CreatedAt   time.Time  `json:"createdAt"`
	LastUsedAt  *time.Time `json:"lastUsedAt"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
}

// OAuthCode is an authorization code waiting to be exchanged.
type OAuthCode struct {
	CodeHash      string `gorm:"primaryKey"`
	ClientID      string
	ClientName    string
	ClientHost    string
	UserID        string
	WorkspaceID   string
	RedirectURI   string
	CodeChallenge string
	Scope         string
	Resource      string
	GrantID       string
	ExpiresAt     time.Time
	UsedAt        *time.Time
	CreatedAt     time.Time
}

// OAuthToken is an access or refresh token of a grant, kept as a hash.
type OAuthToken struct {
	ID        string
	GrantID   string
	Kind      string // TokenAccess or TokenRefresh
	TokenHash string
	ExpiresAt time.Time
	UsedAt    *time.Time
	CreatedAt time.Time
}

// The kinds of OAuthToken.
const (
	TokenAccess  = "access"
	TokenRefresh = "refresh"
)

// ErrReused is returned when a spent authorization code or refresh token is
// presented again; the grant it produced has been revoked.
var ErrReused = errors.New("store: code or token reused")

// NewTokens are the hashes and expiry times of a fresh access/refresh pair.
type NewTokens struct {
	AccessHash, RefreshHash string
	AccessExpires           time.Time
	RefreshExpires          time.Time
}

// CreateOAuthClient stores a dynamically registered client.
func (db *DB) CreateOAuthClient(ctx context.Context, c *OAuthClient) error {
	if err := db.WithContext(ctx).Create(c).Error; err != nil {
		return fmt.Errorf("create oauth client: %w", err)
	}
	return nil
}

// OAuthClientByID finds a dynamically registered client.
func (db *DB) OAuthClientByID(ctx context.Context, id string) (*OAuthClient, error) {
	var c OAuthClient
	if err := db.WithContext(ctx).Where("id = ?", id).Take(&c).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// CreateOAuthCode stores an authorization code the person allowed.
func (db *DB) CreateOAuthCode(ctx context.Context, c *OAuthCode) error {
	if err := db.WithContext(ctx).Create(c).Error; err != nil {
		return fmt.Errorf("create oauth code: %w", err)
	}
	return nil
}

// ExchangeOAuthCode spends an authorization code and starts its grant with
// a first pair of tokens, in one transaction. check runs on the spent code
// before the grant is made (client, redirect URI, PKCE); its error is
// returned as is, and the code stays spent. A code presented a second time
// revokes the grant it produced and gives ErrReused (with that grant, so
// the caller can end its sessions); an unknown or expired code gives
// ErrNotFound.
func (db *DB) ExchangeOAuthCode(ctx context.Context, hash string, now time.Time, check func(*OAuthCode) error, toks NewTokens) (*OAuthGrant, error) {
	res := db.WithContext(ctx).Model(&OAuthCode{}).
		Where("code_hash = ? AND used_at IS NULL AND expires_at > ?", hash, now).Update("used_at", now)
	if res.Error != nil {
		return nil, fmt.Errorf("spend oauth code: %w", res.Error)
	}
	var code OAuthCode
	if err := db.WithContext(ctx).Where("code_hash = ?", hash).Take(&code).Error; err != nil {
		return nil, notFound(err)
	}
	if res.RowsAffected == 0 {
		if code.UsedAt == nil {
			return nil, ErrNotFound // expired
		}
		if code.GrantID == "" {
			return nil, ErrReused // spent a moment ago, its grant not yet made
		}
		if err := db.revokeGrant(ctx, code.GrantID, now); err != nil {
			return nil, err
		}
		return &OAuthGrant{ID: code.GrantID}, ErrReused
	}
	if err := check(&code); err != nil {
		return nil, err
	}
	g := &OAuthGrant{ID: NewID(), UserID: code.UserID, WorkspaceID: code.WorkspaceID, ClientID: code.ClientID,
		ClientName: code.ClientName, ClientHost: code.ClientHost, Scope: code.Scope, Resource: code.Resource, CreatedAt: now}
	err := db.txDirect(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(g).Error; err != nil {
			return err
		}
		if err := tx.Model(&OAuthCode{}).Where("code_hash = ?", hash).Update("grant_id", g.ID).Error; err != nil {
			return err
		}
		return insertTokens(tx, g.ID, now, toks)
	})
	if err != nil {
		return nil, fmt.Errorf("start oauth grant: %w", err)
	}
	return g, nil
}

func insertTokens(tx *gorm.DB, grantID string, now time.Time, toks NewTokens) error {
	return tx.Create([]OAuthToken{
		{ID: NewID(), GrantID: grantID, Kind: TokenAccess, TokenHash: toks.AccessHash, ExpiresAt: toks.AccessExpires, CreatedAt: now},
		{ID: NewID(), GrantID: grantID, Kind: TokenRefresh, TokenHash: toks.RefreshHash, ExpiresAt: toks.RefreshExpires, CreatedAt: now},
	}).Error
}

// RotateOAuthRefresh spends a refresh token of clientID's live grant and
// issues the next pair. A spent token presented again revokes the whole
// grant (its family) and gives ErrReused with the grant; an unknown, expired or revoked
// one, or one of another client, gives ErrNotFound.
func (db *DB) RotateOAuthRefresh(ctx context.Context, hash, clientID string, now time.Time, toks NewTokens) (*OAuthGrant, error) {
	var tok OAuthToken
	if err := db.WithContext(ctx).Where("token_hash = ? AND kind = ?", hash, TokenRefresh).Take(&tok).Error; err != nil {
		return nil, notFound(err)
	}
	var g OAuthGrant
	if err := db.WithContext(ctx).Where("id = ? AND revoked_at IS NULL", tok.GrantID).Take(&g).Error; err != nil {
		return nil, notFound(err)
	}
	if g.ClientID != clientID {
		return nil, ErrNotFound
	}
	var reused bool
	err := db.txDirect(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&OAuthToken{}).Where("id = ? AND used_at IS NULL AND expires_at > ?", tok.ID, now).Update("used_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			reused = tok.UsedAt != nil || tok.ExpiresAt.After(now)
			return ErrNotFound
		}
		return insertTokens(tx, g.ID, now, toks)
	})
	if errors.Is(err, ErrNotFound) && reused {
		if err := db.revokeGrant(ctx, g.ID, now); err != nil {
			return nil, err
		}
		return &g, ErrReused
	}
	if err != nil {
		return nil, notFound(err)
	}
	return &g, nil
}

// OAuthAccess is who a valid access token speaks for.
type OAuthAccess struct {
	Agent     AgentIdentity // TokenID is the grant's id
	Grant     OAuthGrant
	ExpiresAt time.Time
}

// AuthenticateOAuth resolves an access token's hash to its live grant and
// workspace, and records when the grant was last used (to the minute).
func (db *DB) AuthenticateOAuth(ctx context.Context, hash string, now time.Time) (*OAuthAccess, error) {
	if a, ok := db.oauth.get(hash); ok && a.ExpiresAt.After(now) {
		return &a, nil
	}
	var tok OAuthToken
	err := db.WithContext(ctx).Where("token_hash = ? AND kind = ? AND expires_at > ?", hash, TokenAccess, now).Take(&tok).Error
	if err != nil {
		return nil, notFound(err)
	}
	var g OAuthGrant
	if err := db.WithContext(ctx).Where("id = ? AND revoked_at IS NULL", tok.GrantID).Take(&g).Error; err != nil {
		return nil, notFound(err)
	}
	var w Workspace
	if err := db.WithContext(ctx).Where("id = ?", g.WorkspaceID).Take(&w).Error; err != nil {
		return nil, notFound(err)
	}
	if g.LastUsedAt == nil || now.Sub(*g.LastUsedAt) > agentTouchEvery {
		if err := db.WithContext(ctx).Model(&OAuthGrant{}).Where("id = ?", g.ID).Update("last_used_at", now).Error; err != nil {
			return nil, fmt.Errorf("touch oauth grant: %w", err)
		}
		g.LastUsedAt = &now
	}
	a := OAuthAccess{Agent: AgentIdentity{TokenID: g.ID, Workspace: w, Grant: true}, Grant: g, ExpiresAt: tok.ExpiresAt}
	db.oauth.put(hash, a)
	return &a, nil
}

// OAuthGrants lists a workspace's live grants; the workspace must be the person's.
func (db *DB) OAuthGrants(ctx context.Context, ownerID, workspaceID string) ([]OAuthGrant, error) {
	if _, err := db.Workspace(ctx, ownerID, workspaceID); err != nil {
		return nil, err
	}
	out := []OAuthGrant{}
	err := db.WithContext(ctx).Where("workspace_id = ? AND revoked_at IS NULL", workspaceID).Order("id").Find(&out).Error
	return out, err
}

// RevokeOAuthGrant revokes a grant of one of a person's workspaces, and with
// it every token it issued.
func (db *DB) RevokeOAuthGrant(ctx context.Context, ownerID, workspaceID, id string) error {
	if _, err := db.Workspace(ctx, ownerID, workspaceID); err != nil {
		return err
	}
	var g OAuthGrant
	if err := db.WithContext(ctx).Where("id = ? AND workspace_id = ? AND revoked_at IS NULL", id, workspaceID).Take(&g).Error; err != nil {
		return notFound(err)
	}
	return db.revokeGrant(ctx, id, Now())
}

// RevokeOAuthGrantOfToken revokes the grant a token (access or refresh)
// belongs to, if the token is clientID's (RFC 7009: an unknown token is not
// an error, and gives "").
func (db *DB) RevokeOAuthGrantOfToken(ctx context.Context, hash, clientID string) (string, error) {
	var tok OAuthToken
	err := db.WithContext(ctx).Where("token_hash = ?", hash).Take(&tok).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var g OAuthGrant
	err = db.WithContext(ctx).Where("id = ? AND revoked_at IS NULL", tok.GrantID).Take(&g).Error
	if errors.Is(err, gorm.ErrRecordNotFound) || (err == nil && g.ClientID != clientID) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return g.ID, db.revokeGrant(ctx, g.ID, Now())
}

func (db *DB) revokeGrant(ctx context.Context, id string, now time.Time) error {
	defer db.oauth.clear()
	err := db.txDirect(ctx, func(tx *gorm.DB) error {
		if err := tx.Model(&OAuthGrant{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", now).Error; err != nil {
			return err
		}
		return tx.Where("grant_id = ?", id).Delete(&OAuthToken{}).Error
	})
	if err != nil {
		return fmt.Errorf("revoke oauth grant: %w", err)
	}
	return nil
}

// SweepOAuth deletes codes and tokens that can no longer do anything. Spent
// refresh tokens of a live grant stay until they expire, since presenting
// one again is how reuse is caught.
func (db *DB) SweepOAuth(ctx context.Context) (int64, error) {
	now := Now()
	codes := db.WithContext(ctx).Where("expires_at <= ?", now.Add(-time.Hour)).Delete(&OAuthCode{})
	if codes.Error != nil {
		return 0, fmt.Errorf("sweep oauth codes: %w", codes.Error)
	}
	toks := db.WithContext(ctx).Where("expires_at <= ?", now).Delete(&OAuthToken{})
	if toks.Error != nil {
		return 0, fmt.Errorf("sweep oauth tokens: %w", toks.Error)
	}
	// Anyone may register a client, so registrations that no live grant
	// uses go after a day; a client that comes back meets invalid_client
	// and registers again (the SDKs do this themselves).
	clients := db.WithContext(ctx).Where("created_at <= ? AND id NOT IN (?)", now.Add(-24*time.Hour),
		db.Model(&OAuthGrant{}).Select("client_id").Where("revoked_at IS NULL")).Delete(&OAuthClient{})
	if clients.Error != nil {
		return 0, fmt.Errorf("sweep oauth clients: %w", clients.Error)
	}
	return codes.RowsAffected + toks.RowsAffected + clients.RowsAffected, nil
}

// Table names: gorm would spell "OAuth" as "o_auth".

// TableName is oauth_clients.
func (OAuthClient) TableName() string { return "oauth_clients" }

// TableName is oauth_grants.
func (OAuthGrant) TableName() string { return "oauth_grants" }

// TableName is oauth_codes.
func (OAuthCode) TableName() string { return "oauth_codes" }

// TableName is oauth_tokens.
func (OAuthToken) TableName() string { return "oauth_tokens" }
