package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm/clause"

	"github.com/tabbridge/tabbridge/store"
)

// The registry's defaults, after coder/coder's replicas: an instance
// renews its heartbeat every DefaultHeartbeat and is dead once its heartbeat
// is DefaultDeadAfter old (three missed beats).
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultDeadAfter = 15 * time.Second
)

// Link kinds: what an instance holds for a person.
const (
	LinkBrowser = "browser"
	LinkMachine = "machine"
)

// Instance is one server instance's row.
type Instance struct {
	ID          string
	Address     string // internal address other instances reach it at ("" if none)
	StartedAt   time.Time
	HeartbeatAt time.Time
	StoppedAt   *time.Time
}

// TableName is instances.
func (Instance) TableName() string { return "instances" }

// Link is a browser or daemon socket an instance holds. It is keyed by its
// person too: a browser's id is the extension's say-so, and two people's
// browsers of one id are two links.
type Link struct {
	InstanceID string `gorm:"primaryKey"`
	Kind       string `gorm:"primaryKey"`
	UserID     string `gorm:"primaryKey"`
	LinkID     string `gorm:"primaryKey"`
	Since      time.Time
}

// TableName is instance_links.
func (Link) TableName() string { return "instance_links" }

// Options configures a Registry.
type Options struct {
	DB *store.DB
	// ID is this instance's id; a new one when empty. An instance restarted
	// with the same id (--instance-id) cleans its previous run's leftovers at
	// once instead of waiting for them to go stale.
	ID      string
	Address string
	// Heartbeat and DeadAfter: DefaultHeartbeat and DefaultDeadAfter when 0.
	Heartbeat, DeadAfter time.Duration
	// Single says this is the only instance the database may have
	// (SQLite): every other row is a leftover, whatever its heartbeat.
	Single bool
	// OnDead cleans what a dead instance left (its pending approvals, the
	// links it held, already deleted and passed in). It runs on every living
	// instance that notices the death, possibly at once: it must be
	// idempotent. An error keeps the instance's row for the next sweep.
	OnDead func(ctx context.Context, instanceID string, links []Link) error
	Logger *slog.Logger
	// Now is the clock (store.Now when nil).
	Now func() time.Time
}

// Registry keeps this instance's row alive and sweeps dead ones.
type Registry struct {
	opts Options // static after New
	self Instance

	// beatOK is the unix nanos of the last heartbeat written.
	beatOK atomic.Int64
	size   atomic.Int64 // living instances seen by the last sweep

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New fills the defaults; Start registers.
func New(o Options) *Registry {
	if o.ID == "" {
		o.ID = store.NewID()
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.DeadAfter == 0 {
		o.DeadAfter = DefaultDeadAfter
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = store.Now
	}
	return &Registry{opts: o}
}

// ID is this instance's id.
func (r *Registry) ID() string { return r.opts.ID }

// Heartbeat and DeadAfter are the periods in force.
func (r *Registry) Heartbeat() time.Duration { return r.opts.Heartbeat }

// DeadAfter is how old a heartbeat may get before its instance is dead.
func (r *Registry) DeadAfter() time.Duration { return r.opts.DeadAfter }

// Start cleans this instance's previous run (same id) and every dead
// instance, registers, and renews the heartbeat until Close.
func (r *Registry) Start(ctx context.Context) error {
	if err := r.cleanSelf(ctx); err != nil {
		return err
	}
	now := r.opts.Now()
	r.self = Instance{ID: r.opts.ID, Address: r.opts.Address, StartedAt: now, HeartbeatAt: now}
	if err := r.opts.DB.WithContext(ctx).Create(&r.self).Error; err != nil {
		return fmt.Errorf("register instance: %w", err)
	}
	r.beatOK.Store(time.Now().UnixNano())
	if err := r.Sweep(ctx); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go r.loop(lctx)
	return nil
}

// cleanSelf treats a row with this instance's id as its previous run: dead.
func (r *Registry) cleanSelf(ctx context.Context) error {
	var n int64
	if err := r.opts.DB.WithContext(ctx).Model(&Instance{}).Where("id = ?", r.opts.ID).Count(&n).Error; err != nil {
		return fmt.Errorf("read instance registry: %w", err)
	}
	if n == 0 {
		return nil
	}
	r.opts.Logger.Info("cleaning what this instance's previous run left", "instance", r.opts.ID)
	return r.bury(ctx, r.opts.ID)
}

func (r *Registry) loop(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.beat(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("instance heartbeat", "err", err)
		}
		if err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Warn("sweep dead instances", "err", err)
		}
	}
}

// beat renews the heartbeat; a row swept by others while this instance was
// cut off (it was taken for dead) is written back.
func (r *Registry) beat(ctx context.Context) error {
	r.self.HeartbeatAt = r.opts.Now()
	res := r.opts.DB.WithContext(ctx).Model(&Instance{}).Where("id = ?", r.opts.ID).Update("heartbeat_at", r.self.HeartbeatAt)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		r.opts.Logger.Warn("this instance was taken for dead by the others; registering again", "instance", r.opts.ID)
		if err := r.opts.DB.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&r.self).Error; err != nil {
			return err
		}
	}
	r.beatOK.Store(time.Now().UnixNano())
	return nil
}

// Healthy reports whether this instance's heartbeat was written recently
// enough that the others count it alive.
func (r *Registry) Healthy() bool {
	last := time.Unix(0, r.beatOK.Load())
	return r.beatOK.Load() != 0 && time.Since(last) < r.opts.DeadAfter
}

// Size is how many living instances the last sweep saw, this one included.
func (r *Registry) Size() int { return int(r.size.Load()) }

// Sweep cleans every dead instance: stopped, or a heartbeat older than
// DeadAfter (any other instance at all, when Single).
func (r *Registry) Sweep(ctx context.Context) error {
	var all []Instance
	if err := r.opts.DB.WithContext(ctx).Find(&all).Error; err != nil {
		return fmt.Errorf("read instance registry: %w", err)
	}
	cutoff := r.opts.Now().Add(-r.opts.DeadAfter)
	alive := 0
	for _, in := range all {
		dead := in.ID != r.opts.ID && (r.opts.Single || in.StoppedAt != nil || in.HeartbeatAt.Before(cutoff))
		if !dead {
			alive++
			continue
		}
		r.opts.Logger.Info("cleaning what a dead instance left", "instance", in.ID, "heartbeat", in.HeartbeatAt, "stopped", in.StoppedAt != nil)
		if err := r.bury(ctx, in.ID); err != nil {
			return err
		}
	}
	r.size.Store(int64(alive))
	return nil
}

// bury deletes a dead instance's links, hands them to OnDead, and deletes
// its row. Links are deleted with RETURNING, so each is handed to one
// sweeper only, even when several sweep at once.
func (r *Registry) bury(ctx context.Context, id string) error {
	var links []Link
	err := r.opts.DB.WithContext(ctx).Clauses(clause.Returning{}).Where("instance_id = ?", id).Delete(&links).Error
	if err != nil {
		return fmt.Errorf("delete links of instance %s: %w", id, err)
	}
	if r.opts.OnDead != nil {
		if err := r.opts.OnDead(ctx, id, links); err != nil {
			return fmt.Errorf("clean instance %s: %w", id, err)
		}
	}
	if err := r.opts.DB.WithContext(ctx).Where("id = ?", id).Delete(&Instance{}).Error; err != nil {
		return fmt.Errorf("delete instance %s: %w", id, err)
	}
	return nil
}

// Link records that this instance holds a socket of kind for userID.
func (r *Registry) Link(ctx context.Context, kind, id, userID string) error {
	l := Link{InstanceID: r.opts.ID, Kind: kind, LinkID: id, UserID: userID, Since: r.opts.Now()}
	if err := r.opts.DB.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&l).Error; err != nil {
		return fmt.Errorf("record link: %w", err)
	}
	return nil
}

// Unlink records that this instance no longer holds userID's socket; another
// person's link of the same id stays.
func (r *Registry) Unlink(ctx context.Context, kind, id, userID string) error {
	err := r.opts.DB.WithContext(ctx).Where("instance_id = ? AND kind = ? AND user_id = ? AND link_id = ?", r.opts.ID, kind, userID, id).Delete(&Link{}).Error
	if err != nil {
		return fmt.Errorf("drop link: %w", err)
	}
	return nil
}

// Links lists the living links of kind for userID on every instance.
func (r *Registry) Links(ctx context.Context, kind, userID string) ([]Link, error) {
	var out []Link
	err := r.opts.DB.WithContext(ctx).Where("kind = ? AND user_id = ?", kind, userID).Order("since DESC").Find(&out).Error
	return out, err
}

// Close stops the heartbeat and marks this instance stopped, so the others
// clean whatever its shutdown left at their next sweep instead of after
// DeadAfter. Links and the row stay for them (or for a restart with the
// same id) to clean.
func (r *Registry) Close(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
		r.wg.Wait()
		now := r.opts.Now()
		err = r.opts.DB.WithContext(ctx).Model(&Instance{}).Where("id = ?", r.opts.ID).Update("stopped_at", now).Error
	})
	return err
}
