package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SharedSite is an origin a person shares with one of their workspaces. An
// origin is shared with at most one workspace at a time.
type SharedSite struct {
	ID          string    `json:"id"`
	UserID      string    `json:"-"`
	WorkspaceID string    `json:"workspaceId"`
	Origin      string    `json:"origin"`
	CreatedAt   time.Time `json:"createdAt"`
	// WorkspaceName is read through a join, never written.
	WorkspaceName string `json:"workspaceName" gorm:"->"`
}

// Browser is an extension install that has connected as a person, keyed by
// the id the extension generates and keeps.
type Browser struct {
	UserID    string    `gorm:"primaryKey"`
	BrowserID string    `gorm:"primaryKey"`
	Name      string    // the person may rename it; a reconnect keeps it
	Version   string    // the extension version it last announced
	FirstSeen time.Time //
	LastSeen  time.Time // its last connect or disconnect
}

func (db *DB) sharedSitesQuery(ctx context.Context) *gorm.DB {
	return db.WithContext(ctx).Table("shared_sites").
		Select("shared_sites.*, workspaces.name AS workspace_name").
		Joins("JOIN workspaces ON workspaces.id = shared_sites.workspace_id")
}

// SharedSites lists a person's shared sites, ordered by origin.
func (db *DB) SharedSites(ctx context.Context, userID string) ([]SharedSite, error) {
	out := []SharedSite{}
	err := db.sharedSitesQuery(ctx).Where("shared_sites.user_id = ?", userID).Order("shared_sites.origin").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("shared sites: %w", err)
	}
	return out, nil
}

// SharedSite finds one of a person's shared sites by id.
func (db *DB) SharedSite(ctx context.Context, userID, id string) (*SharedSite, error) {
	var s SharedSite
	err := db.sharedSitesQuery(ctx).Where("shared_sites.id = ? AND shared_sites.user_id = ?", id, userID).Take(&s).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &s, nil
}

// ShareSite shares origin (already normalised) with one of the person's
// workspaces. If the origin was shared with another workspace it moves there.
// prevWorkspace is the workspace it was shared with before ("" when it was
// not shared). The workspace must be the person's (else ErrNotFound).
func (db *DB) ShareSite(ctx context.Context, userID, workspaceID, origin string) (site *SharedSite, prevWorkspace string, err error) {
	return db.ShareSiteUpTo(ctx, userID, workspaceID, origin, 0)
}

// ShareSiteUpTo is ShareSite refused (LimitError) when the origin is not
// shared yet and the person shares max sites (0: no cap); a move to another
// workspace adds no row and is never refused. Counted and written holding
// the person (InUser).
func (db *DB) ShareSiteUpTo(ctx context.Context, userID, workspaceID, origin string, max int) (site *SharedSite, prevWorkspace string, err error) {
	defer db.sites.clear()
	row := &SharedSite{ID: NewID(), UserID: userID, WorkspaceID: workspaceID, Origin: origin, CreatedAt: Now()}
	err = db.asPerson(ctx, userID, max, func(tx *gorm.DB) error {
		if err := tx.Where("id = ? AND owner_id = ?", workspaceID, userID).Take(&Workspace{}).Error; err != nil {
			return notFound(err)
		}
		var before SharedSite
		err := tx.Where("user_id = ? AND origin = ?", userID, origin).Take(&before).Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		prevWorkspace = before.WorkspaceID
		if prevWorkspace == "" {
			if err := roomFor(tx.Model(&SharedSite{}).Where("user_id = ?", userID), LimitSharedSites, max); err != nil {
				return err
			}
		}
		// One statement on both databases: concurrent shares of one origin
		// (without a cap, so not holding the person) leave exactly one row,
		// in the workspace of whichever ran last.
		return tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "user_id"}, {Name: "origin"}},
			DoUpdates: clause.AssignmentColumns([]string{"workspace_id", "created_at"}),
		}).Omit("WorkspaceName").Create(row).Error
	})
	if errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", fmt.Errorf("share site: %w", err)
	}
	var id string
	if err := db.WithContext(ctx).Table("shared_sites").Select("id").Where("user_id = ? AND origin = ?", userID, origin).Take(&id).Error; err != nil {
		return nil, "", fmt.Errorf("share site: %w", err)
	}
	site, err = db.SharedSite(ctx, userID, id)
	return site, prevWorkspace, err
}

// UnshareSite stops sharing one of a person's sites.
func (db *DB) UnshareSite(ctx context.Context, userID, id string) error {
	defer db.sites.clear()
	return affectedOne(db.WithContext(ctx).Where("id = ? AND user_id = ?", id, userID).Delete(&SharedSite{}))
}

// SeeBrowser records that a person's browser connected: a new browser is
// stored with the name it suggests; a known one keeps the name it has (the
// person may have renamed it) and updates its version. It returns the row.
func (db *DB) SeeBrowser(ctx context.Context, userID, browserID, name, version string) (*Browser, error) {
	now := Now()
	row := &Browser{UserID: userID, BrowserID: browserID, Name: name, Version: version, FirstSeen: now, LastSeen: now}
	err := db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "user_id"}, {Name: "browser_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"version", "last_seen"}),
	}).Create(row).Error
	if err != nil {
		return nil, fmt.Errorf("see browser: %w", err)
	}
	// A client names its own browser id, so a person's rows are bounded
	// here: beyond MaxBrowsers, the least recently seen others are forgotten.
	err = db.WithContext(ctx).Exec(`DELETE FROM browsers WHERE user_id = ? AND browser_id <> ? AND browser_id NOT IN
		(SELECT browser_id FROM browsers WHERE user_id = ? AND browser_id <> ? ORDER BY last_seen DESC, browser_id DESC LIMIT ?)`,
		userID, browserID, userID, browserID, MaxBrowsers-1).Error
	if err != nil {
		return nil, fmt.Errorf("see browser: forget the least recently seen: %w", err)
	}
	return db.Browser(ctx, userID, browserID)
}

// MaxBrowsers is how many browsers a person's list keeps: seeing one more
// forgets the least recently seen of the others (its name with it; it is
// listed again, as new, if it ever connects again). A client with a ticket
// names its own browser id, so without it a script could add rows to the
// browsers page without end; no person uses a hundred browsers.
const MaxBrowsers = 100

// TouchBrowser sets a browser's last-seen time to now.
func (db *DB) TouchBrowser(ctx context.Context, userID, browserID string) error {
	err := db.WithContext(ctx).Model(&Browser{}).Where("user_id = ? AND browser_id = ?", userID, browserID).
		Update("last_seen", Now()).Error
	if err != nil {
		return fmt.Errorf("touch browser: %w", err)
	}
	return nil
}

// Browser finds one of a person's browsers.
func (db *DB) Browser(ctx context.Context, userID, browserID string) (*Browser, error) {
	var b Browser
	if err := db.WithContext(ctx).Where("user_id = ? AND browser_id = ?", userID, browserID).Take(&b).Error; err != nil {
		return nil, notFound(err)
	}
	return &b, nil
}

// Browsers lists every browser a person has connected, most recently seen first.
func (db *DB) Browsers(ctx context.Context, userID string) ([]Browser, error) {
	out := []Browser{}
	if err := db.WithContext(ctx).Where("user_id = ?", userID).Order("last_seen DESC, browser_id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("browsers: %w", err)
	}
	return out, nil
}

// RenameBrowser renames one of a person's browsers.
func (db *DB) RenameBrowser(ctx context.Context, userID, browserID, name string) (*Browser, error) {
	res := db.WithContext(ctx).Model(&Browser{}).Where("user_id = ? AND browser_id = ?", userID, browserID).Update("name", name)
	if err := affectedOne(res); err != nil {
		return nil, err
	}
	return db.Browser(ctx, userID, browserID)
}

// WorkspaceSites lists the sites shared with a workspace, ordered by origin,
// for a caller already scoped to it (an agent token's workspace).
func (db *DB) WorkspaceSites(ctx context.Context, workspaceID string) ([]SharedSite, error) {
	if out, ok := db.sites.get(workspaceID); ok {
		return out, nil
	}
	out := []SharedSite{}
	err := db.sharedSitesQuery(ctx).Where("shared_sites.workspace_id = ?", workspaceID).Order("shared_sites.origin").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("workspace sites: %w", err)
	}
	db.sites.put(workspaceID, out)
	return out, nil
}

// Shares reports whether a person shares origin with any workspace.
func (db *DB) Shares(ctx context.Context, userID, origin string) (bool, error) {
	var n int64
	err := db.WithContext(ctx).Table("shared_sites").Where("user_id = ? AND origin = ?", userID, origin).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("shares: %w", err)
	}
	return n > 0, nil
}
