package store

import "time"

// User is a person who signs in to the web app.
type User struct {
	ID           string    `json:"id"`
	Email        string    `json:"email"`
	Name         string    `json:"name"`
	PasswordHash string    `json:"-"`
	IsOwner      bool      `json:"isOwner"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// Invitation is a one-time link the owner creates for a new account.
type Invitation struct {
	ID        string     `json:"id"`
	CreatedBy string     `json:"-"`
	TokenHash string     `json:"-"`
	Note      string     `json:"note"`
	ExpiresAt time.Time  `json:"expiresAt"`
	UsedAt    *time.Time `json:"usedAt"`
	UsedBy    *string    `json:"-"`
	CreatedAt time.Time  `json:"createdAt"`
}

// RefreshToken is one link in a sign-in's rotation chain; FamilyID ties the
// chain together so reuse of an old link can revoke all of it.
type RefreshToken struct {
	ID        string
	UserID    string
	FamilyID  string
	TokenHash string
	ExpiresAt time.Time
	UsedAt    *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// SignIn is one sign-in of a person (a refresh family): the browser that
// started it and when it was last refreshed.
type SignIn struct {
	ID         string    `json:"id"`
	UserID     string    `json:"-"`
	UserAgent  string    `json:"userAgent"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

// Workspace groups agent tokens, tasks and the sites shared with them.
type Workspace struct {
	ID        string    `json:"id"`
	OwnerID   string    `json:"-"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// AgentToken authenticates an agent to one workspace's agent endpoints.
type AgentToken struct {
	ID          string     `json:"id"`
	WorkspaceID string     `json:"workspaceId"`
	Name        string     `json:"name"`
	TokenHash   string     `json:"-"`
	CreatedAt   time.Time  `json:"createdAt"`
	LastUsedAt  *time.Time `json:"lastUsedAt"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
	// ExpiresAt is when the token stops working (nil: never); an expired
	// token is refused with ErrTokenExpired.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Expired reports whether the token has passed its expiry at now.
func (t AgentToken) Expired(now time.Time) bool {
	return t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)
}

// Task is a piece of work in a workspace that approvals and calls hang on.
type Task struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspaceId"`
	Title       string    `json:"title"`
	Status      string    `json:"status"`
	CreatedBy   string    `json:"createdBy"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// TaskStatuses is the closed set of task states.
var TaskStatuses = []string{"notstarted", "ongoing", "blocked", "completed", "rejected"}

// openTaskStatuses are the states of a task still being worked on.
var openTaskStatuses = []string{"notstarted", "ongoing", "blocked"}

// TaskOpen reports whether a task in status s is still being worked on.
func TaskOpen(s string) bool {
	for _, v := range openTaskStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// ValidTaskStatus reports whether s is one of TaskStatuses.
func ValidTaskStatus(s string) bool {
	for _, v := range TaskStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// Machine is a computer whose terminal daemon a person connected; its
// sessions live on the daemon and are not stored.
type Machine struct {
	ID         string     `json:"id"`
	UserID     string     `json:"-"`
	Name       string     `json:"name"`
	TokenHash  string     `json:"-"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastSeenAt *time.Time `json:"lastSeenAt"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	// InstallHash is the hash of the install id of the daemon that first
	// linked with this machine's token; nil until then.
	InstallHash *string `json:"-"`
	// OtherInstallAt is when a daemon of another install last presented
	// the token and was refused; nil if none ever did.
	OtherInstallAt *time.Time `json:"otherInstallAt"`
}
