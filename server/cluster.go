package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/live"
	"github.com/tabbridge/tabbridge/relay"
)

// The signals instances send each other (docs/DECISIONS.md, "Several
// instances"). Each payload is small: an id, a cache name, or one live
// event (large ones travel by reference: cluster.Postgres).
const (
	topicCache   = "cache"            // a cache name: clear it
	topicLive    = "live"             // a person's event: deliver it to their pages here
	topicSettled = "approval.settled" // a request id: release the calls here waiting on it
	topicSignout = "signin.ended"     // a sign-in family: close what it opened here
	topicMachine = "machine.revoked"  // a machine id: close its daemon's socket here
	topicGrant   = "grant.revoked"    // an OAuth grant id: end its calls and MCP sessions here
	topicAgent   = "agent.revoked"    // an agent token id: end its calls and MCP sessions here
	topicBadge   = "approvals.badge"  // a request changed: update the person's browsers here
)

// cacheAskAll names the approvals gate's cache of "ask for every tool".
const cacheAskAll = "askall"

// liveSignal is one live event as it travels between instances.
type liveSignal struct {
	User string          `json:"u"`
	Type string          `json:"t"`
	Data json.RawMessage `json:"d"`
}

// newBus picks the signal bus: LISTEN/NOTIFY on PostgreSQL, in process on
// SQLite (one instance only: the database is one file on one machine).
func (s *Server) newBus() cluster.Bus {
	if !s.multi() {
		return cluster.NewMemory(s.id)
	}
	sqlDB, _ := s.opts.DB.DB.DB()
	return cluster.NewPostgres(cluster.PostgresOptions{Self: s.id, URL: s.opts.DB.PostgresURL(), DB: sqlDB,
		Logger: s.opts.Logger, OnLag: s.metrics.observeLag})
}

// subscribe wires every signal to what it means here. Signals an instance
// sent itself are skipped: it acted before sending.
func (s *Server) subscribe() {
	from := func(fn func(cluster.Message)) func(cluster.Message) {
		return func(m cluster.Message) {
			if m.From != s.id {
				fn(m)
			}
		}
	}
	s.bus.Subscribe(topicHello, from(func(cluster.Message) { s.othersSeen() }))
	s.subscribeDirectory()
	s.subscribePeople()
	s.bus.Subscribe(topicCache, from(func(m cluster.Message) {
		if string(m.Data) == cacheAskAll {
			s.gate.ForgetAskAll()
			return
		}
		s.opts.DB.Invalidated(string(m.Data))
	}))
	s.bus.Subscribe(topicLive, from(func(m cluster.Message) {
		var ev liveSignal
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			s.opts.Logger.Warn("malformed live signal", "from", m.From, "err", err)
			return
		}
		s.live.Publish(ev.User, live.Event{Type: ev.Type, Data: ev.Data})
		s.machineLinkedElsewhere(ev) // terminal_forward.go
	}))
	s.bus.Subscribe(topicSettled, from(func(m cluster.Message) { go s.gate.Settled(string(m.Data)) }))
	s.bus.Subscribe(topicSignout, from(func(m cluster.Message) { s.signins.endLocal(string(m.Data)) }))
	s.bus.Subscribe(topicMachine, from(func(m cluster.Message) { s.machines.endLocal(string(m.Data)) }))
	s.bus.Subscribe(topicGrant, from(func(m cluster.Message) { s.grantRevokedLocal(string(m.Data)) }))
	s.bus.Subscribe(topicAgent, from(func(m cluster.Message) { s.agents.endLocal(string(m.Data)) }))
	s.bus.Subscribe(topicBadge, from(func(m cluster.Message) {
		var b badgeSignal
		if err := json.Unmarshal(m.Data, &b); err != nil {
			s.opts.Logger.Warn("malformed badge signal", "from", m.From, "err", err)
			return
		}
		go s.pushBadge(b.User, b.Event, b.Request)
	}))
	s.bus.OnResync(func() { go s.resync() })
	s.opts.DB.OnInvalidate(func(name string) { s.signal(topicCache, []byte(name)) })
	s.opts.DB.SetCacheTrust(s.bus.Healthy)
	s.signins.onEnd = func(key string) { s.signal(topicSignout, []byte(key)) }
	s.machines.onEnd = func(key string) { s.signal(topicMachine, []byte(key)) }
	s.agents.onEnd = func(key string) { s.signal(topicAgent, []byte(key)) }
}

// othersSeen records that another instance exists now.
func (s *Server) othersSeen() { s.othersAt.Store(time.Now().UnixNano()) }

// alone reports whether no other instance can be listening: the last sweep
// saw none, and none has said hello or answered since a dead threshold.
// Signals are then not sent at all (issue 17: a single instance on
// PostgreSQL paid a JSON encoding and a NOTIFY for every live event). A
// starting instance says hello on the bus before it serves, so the others
// send again from the moment it could miss anything.
func (s *Server) alone() bool {
	if s.registry.Size() > 1 {
		return false
	}
	return time.Since(time.Unix(0, s.othersAt.Load())) > s.registry.DeadAfter()
}

// signal tells every other instance; a failure is logged (the others
// resync when their bus comes back, which covers a lost signal only if
// theirs was the side that failed: see docs/DECISIONS.md).
func (s *Server) signal(topic string, data []byte) {
	if !s.multi() || s.alone() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.bus.Publish(ctx, topic, data); err != nil {
		s.opts.Logger.Warn("send signal", "topic", topic, "err", err)
	}
}

// multi reports whether other instances may share the database.
func (s *Server) multi() bool { return s.opts.DB.Postgres && !s.opts.SingleInstance }

// resync re-reads what signals may have been missed while the bus was down.
func (s *Server) resync() {
	s.opts.Logger.Info("signal bus connected; re-reading caches, requests and sign-ins")
	s.opts.DB.Invalidated("")
	s.gate.ForgetAskAll()
	s.gate.Resync()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	s.signins.recheck(ctx)
	s.machines.recheck(ctx)
	s.agents.recheck(ctx)
	s.pullDirectories(ctx)
}

// startCluster starts the bus, registers this instance (cleaning dead ones,
// and this id's previous run), and withdraws requests no instance holds.
func (s *Server) startCluster() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.multi() {
		s.opts.DB.SetInstance(s.id) // its running calls name it: a death interrupts them at once
	}
	if err := s.bus.Start(ctx); err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	if s.multi() {
		// Before this instance is registered or serves: the others stop
		// taking themselves for alone as soon as it could miss a signal.
		if err := s.bus.Publish(ctx, topicHello, nil); err != nil {
			s.opts.Logger.Warn("say hello to the other instances", "err", err)
		}
	}
	if err := s.registry.Start(ctx); err != nil {
		s.bus.Close()
		return fmt.Errorf("new server: %w", err)
	}
	if s.multi() {
		s.pullDirectories(ctx)
	}
	if n, err := s.gate.WithdrawOrphans(ctx); err != nil {
		return fmt.Errorf("new server: %w", err)
	} else if n > 0 {
		s.opts.Logger.Info("withdrew approval requests no running instance holds", "count", n)
	}
	if !s.multi() {
		if n, err := s.opts.DB.InterruptRunning(ctx); err != nil {
			return fmt.Errorf("new server: %w", err)
		} else if n > 0 {
			s.opts.Logger.Info("marked calls left running by an earlier run as interrupted", "count", n)
		}
	}
	return nil
}

// longestCall bounds how long a call can stay running: approval window,
// grace and call deadline, and a minute of margin.
func (s *Server) longestCall() time.Duration {
	call := s.opts.CallTimeout
	if call < time.Minute {
		call = time.Minute
	}
	return s.gate.Window() + s.gate.Grace() + call + time.Minute
}

// interruptOrphans marks calls running longer than any call can as
// interrupted: the instance that ran them is gone.
func (s *Server) interruptOrphans(ctx context.Context) (int64, error) {
	return s.opts.DB.InterruptRunningBefore(ctx, s.opts.Now().UTC().Add(-s.longestCall()))
}

// onInstanceDead cleans what a dead instance left: its requests are
// withdrawn (the person reads "the server instance stopped"), and the
// browsers and daemons it held are shown offline.
func (s *Server) onInstanceDead(ctx context.Context, id string, links []cluster.Link) error {
	s.dir.drop(id)
	s.in.peers.Forget(id)
	if n, err := s.gate.WithdrawInstance(ctx, id); err != nil {
		return err
	} else if n > 0 {
		s.opts.Logger.Info("withdrew the approval requests of a dead instance", "instance", id, "count", n)
	}
	if n, err := s.opts.DB.InterruptInstance(ctx, id); err != nil {
		return err
	} else if n > 0 {
		s.opts.Logger.Info("marked the calls a dead instance left running as interrupted", "instance", id, "count", n)
	}
	for _, l := range links {
		switch l.Kind {
		case cluster.LinkBrowser:
			s.publish(l.UserID, evBrowserDisconnected, fiber.Map{"browser": fiber.Map{"id": l.LinkID}})
		case cluster.LinkMachine:
			s.publish(l.UserID, relay.EventMachineOffline, fiber.Map{"machine": fiber.Map{"id": l.LinkID, "online": false}})
		}
	}
	return nil
}

// link and unlink record the sockets this instance holds, so a death shows
// them offline; failures are logged (the link's own events still flow).
func (s *Server) link(kind, id, userID string, up bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if up {
		err = s.registry.Link(ctx, kind, id, userID)
	} else {
		err = s.registry.Unlink(ctx, kind, id, userID)
	}
	if err != nil {
		s.opts.Logger.Warn("record link", "kind", kind, "id", id, "err", err)
	}
}

// Instance is this instance's id in the registry.
func (s *Server) Instance() string { return s.id }

// Registry is the instance registry, for tests and /readyz.
func (s *Server) Registry() *cluster.Registry { return s.registry }

// pruneDirectory forgets the directory entries of instances no longer
// living in the registry (one instance's sweep buries a dead one; the
// others learn it here).
func (s *Server) pruneDirectory(ctx context.Context) (int64, error) {
	var ids []string
	err := s.opts.DB.WithContext(ctx).Model(&cluster.Instance{}).Where("stopped_at IS NULL AND heartbeat_at > ?", s.opts.Now().UTC().Add(-s.registry.DeadAfter())).Pluck("id", &ids).Error
	if err != nil {
		return 0, err
	}
	living := map[string]bool{}
	for _, id := range ids {
		living[id] = true
	}
	s.dir.keep(living)
	return 0, nil
}
