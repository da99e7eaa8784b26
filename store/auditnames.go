package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"
)

// The kinds of audit_names: each string an audit row would repeat on every
// call is stored once per person and kind, and the row holds its small key.
const (
	nameOwner     = 1 // the person whose log it is (name "")
	nameWorkspace = 2
	nameToken     = 3
	nameTask      = 4
	nameSite      = 5
	nameTool      = 6
	nameOutcome   = 7
	nameDecision  = 8
	namePerson    = 9 // who answered the approval request
)

// auditName is one row of audit_names. Keys are never reused or changed, so
// a key read once is good for as long as the process runs.
type auditName struct {
	ID     int64
	UserID string
	Kind   int
	Name   string
}

func (auditName) TableName() string { return "audit_names" }

type nameKey struct {
	user string
	kind int
	name string
}

// nameCache holds the keys this process has read or made, both ways.
// Guarded by mu; bounded by starting over.
type nameCache struct {
	mu    sync.Mutex
	keys  map[nameKey]int64
	names map[int64]auditName
}

const nameCacheMax = 100_000

func (c *nameCache) key(k nameKey) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.keys[k]
	return id, ok
}

func (c *nameCache) name(id int64) (auditName, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.names[id]
	return n, ok
}

func (c *nameCache) put(n auditName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil || len(c.keys) > nameCacheMax {
		c.keys, c.names = map[nameKey]int64{}, map[int64]auditName{}
	}
	c.keys[nameKey{n.UserID, n.Kind, n.Name}] = n.ID
	c.names[n.ID] = n
}

// errNoName: a filter names a value the person's log has never held.
var errNoName = errors.New("store: no such audit name")

// lookupName returns the key of an existing name, or errNoName.
func (db *DB) lookupName(ctx context.Context, user string, kind int, name string) (int64, error) {
	k := nameKey{user, kind, name}
	if id, ok := db.names.key(k); ok {
		return id, nil
	}
	var n auditName
	err := db.WithContext(ctx).Where("user_id = ? AND kind = ? AND name = ?", user, kind, name).Take(&n).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, errNoName
	}
	if err != nil {
		return 0, fmt.Errorf("audit name: %w", err)
	}
	db.names.put(n)
	return n.ID, nil
}

// internName returns the key of a name, adding it if it is new. The next key
// is one more than the largest; an instance that loses the race for it (the
// insert does nothing) reads the winner's row, or tries the next key.
func (db *DB) internName(ctx context.Context, user string, kind int, name string) (int64, error) {
	for range 8 {
		id, err := db.lookupName(ctx, user, kind, name)
		if !errors.Is(err, errNoName) {
			return id, err
		}
		err = db.WithContext(ctx).Exec("INSERT INTO audit_names (id, user_id, kind, name) "+
			"SELECT COALESCE(MAX(id), 0) + 1, ?, ?, ? FROM audit_names WHERE true ON CONFLICT DO NOTHING", user, kind, name).Error
		if err != nil {
			return 0, fmt.Errorf("add audit name: %w", err)
		}
	}
	return 0, fmt.Errorf("add audit name %q: lost the race for a key 8 times", name)
}

// namesOf fills the cache with every key in ids it does not hold, in one
// query.
func (db *DB) namesOf(ctx context.Context, ids map[int64]bool) error {
	var missing []int64
	for id := range ids {
		if _, ok := db.names.name(id); !ok && id != 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var rows []auditName
	if err := db.WithContext(ctx).Where("id IN ?", missing).Find(&rows).Error; err != nil {
		return fmt.Errorf("audit names: %w", err)
	}
	for _, n := range rows {
		db.names.put(n)
	}
	return nil
}

// nameText is the string a key stands for ("" for 0 or a key not found).
func (db *DB) nameText(id int64) string {
	n, _ := db.names.name(id)
	return n.Name
}
