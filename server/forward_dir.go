package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/cluster"
	"github.com/tabbridge/tabbridge/sitetools"
)

// The directory: what each other instance holds of each person — how many
// of their browsers, and per shared site, how many documents, when the most
// recently used was used, and its address and title. It is what a call
// needs to choose a route without asking anyone (docs/DECISIONS.md,
// "Routing across instances"): kept current by one small signal per change
// (topicDir), replaced whole from each peer at start and when the bus
// resyncs, and dropped per instance when it stops or dies. The per-tool
// targets of a remote site, larger, are fetched from its instance on demand
// and cached by the entry's sequence number.

const (
	topicDir     = "dir"      // one directory entry of the sender
	topicDirGone = "dir.gone" // the sender stopped: drop its entries
	topicHello   = "hello"    // the sender starts: others stop assuming they are alone
)

// dirEntry is one directory entry as it travels: a site's documents on the
// sender (Origin set; Tabs 0 when none are left) or the person's browsers
// there (Origin empty). Seq orders the sender's entries, so a snapshot and
// the signals crossing it apply newest first.
type dirEntry struct {
	User     string `json:"u"`
	Origin   string `json:"o,omitempty"`
	Seq      uint64 `json:"q"`
	Browsers int    `json:"b,omitempty"`
	Tabs     int    `json:"n,omitempty"`
	LastUsed int64  `json:"t,omitempty"` // unix ms
	URL      string `json:"l,omitempty"`
	Title    string `json:"ti,omitempty"`
	// Announced says the site's persisted tools changed: drop their cache.
	Announced bool `json:"a,omitempty"`
}

type dirKey struct{ instance, user, origin string }

type targetsKey struct{ instance, user, origin string }

type cachedTargets struct {
	seq     uint64
	targets map[string][]sitetools.Target
}

// directory holds the other instances' entries; every map is guarded by mu.
type directory struct {
	seq atomic.Uint64 // this instance's last entry number

	mu      sync.RWMutex
	entries map[dirKey]dirEntry
	byUser  map[string]map[dirKey]bool // user → their keys
	targets map[targetsKey]cachedTargets
	// moved is when an instance holding browsers of the person went away:
	// they are reconnecting elsewhere. wake is closed (and replaced) at
	// every change a waiting call may be waiting for.
	moved map[string]time.Time
	wake  chan struct{}
}

func newDirectory() *directory {
	d := &directory{entries: map[dirKey]dirEntry{}, byUser: map[string]map[dirKey]bool{}, targets: map[targetsKey]cachedTargets{},
		moved: map[string]time.Time{}, wake: make(chan struct{})}
	// Sequence numbers start at the clock, so a restart with the same id
	// never issues numbers its previous run already did.
	d.seq.Store(uint64(time.Now().UnixNano()))
	return d
}

// apply records an entry from instance; false when it is older than the one held.
func (d *directory) apply(instance string, e dirEntry) bool {
	k := dirKey{instance, e.User, e.Origin}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.entries[k]; ok && old.Seq >= e.Seq {
		return false
	}
	defer d.wakeLocked()
	// An empty entry stays as a tombstone (its sequence number refuses an
	// older snapshot's entry arriving after it), out of the person's index.
	d.entries[k] = e
	if e.Tabs == 0 && e.Browsers == 0 {
		delete(d.byUser[e.User], k)
		return true
	}
	if d.byUser[e.User] == nil {
		d.byUser[e.User] = map[dirKey]bool{}
	}
	d.byUser[e.User][k] = true
	return true
}

// drop forgets every entry of an instance.
func (d *directory) drop(instance string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, e := range d.entries {
		if k.instance == instance {
			if k.origin == "" && e.Browsers > 0 {
				d.moved[k.user] = time.Now()
			}
			delete(d.entries, k)
			delete(d.byUser[k.user], k)
		}
	}
	for k := range d.targets {
		if k.instance == instance {
			delete(d.targets, k)
		}
	}
}

func (d *directory) wakeLocked() {
	close(d.wake)
	d.wake = make(chan struct{})
}

// changed wakes the calls waiting for a browser (one connected here).
func (d *directory) changed() {
	d.mu.Lock()
	d.wakeLocked()
	d.mu.Unlock()
}

// reconnectWindow is how long after an instance holding a person's
// browsers went away a call waits for one of them to connect again
// elsewhere (the extension redials after 1 s, then backs off).
const reconnectWindow = 10 * time.Second

// reconnecting reports until when the person's browsers may be reconnecting
// (zero when they are not), and the channel closed at the next change.
func (d *directory) reconnecting(user string) (time.Time, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.moved[user]
	if !ok {
		return time.Time{}, d.wake
	}
	until := at.Add(reconnectWindow)
	if time.Now().After(until) {
		delete(d.moved, user)
		return time.Time{}, d.wake
	}
	return until, d.wake
}

// keep forgets the entries of every instance not in living.
func (d *directory) keep(living map[string]bool) {
	d.mu.RLock()
	gone := map[string]bool{}
	for k := range d.entries {
		if !living[k.instance] {
			gone[k.instance] = true
		}
	}
	d.mu.RUnlock()
	for id := range gone {
		d.drop(id)
	}
}

// browsers counts the person's browsers on the other instances.
func (d *directory) browsers(user string) int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	n := 0
	for k := range d.byUser[user] {
		if k.origin == "" {
			n += d.entries[k].Browsers
		}
	}
	return n
}

// remoteSite is one other instance's documents of a site.
type remoteSite struct {
	instance string
	entry    dirEntry
}

// sites lists the other instances holding documents of a site, most
// recently used first.
func (d *directory) sites(user, origin string) []remoteSite {
	d.mu.RLock()
	var out []remoteSite
	for k := range d.byUser[user] {
		if k.origin == origin {
			out = append(out, remoteSite{k.instance, d.entries[k]})
		}
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].entry.LastUsed > out[j].entry.LastUsed })
	return out
}

// withBrowsers lists the other instances holding a browser of the person.
func (d *directory) withBrowsers(user string) []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []string
	for k := range d.byUser[user] {
		if k.origin == "" && d.entries[k].Browsers > 0 {
			out = append(out, k.instance)
		}
	}
	sort.Strings(out)
	return out
}

// RemoteSite implements sitetools.RemoteSites.
func (d *directory) RemoteSite(user, origin string) (sitetools.RemoteSite, bool) {
	var out sitetools.RemoteSite
	for i, r := range d.sites(user, origin) {
		out.Tabs += r.entry.Tabs
		if i == 0 {
			out.LastUsed, out.URL, out.Last = time.UnixMilli(r.entry.LastUsed), r.entry.URL, r.entry.Title
		}
	}
	return out, out.Tabs > 0
}

func (d *directory) cachedTargets(k targetsKey, seq uint64) (map[string][]sitetools.Target, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	c, ok := d.targets[k]
	return c.targets, ok && c.seq == seq
}

func (d *directory) cacheTargets(k targetsKey, seq uint64, t map[string][]sitetools.Target) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[dirKey(k)]; ok && e.Seq == seq {
		d.targets[k] = cachedTargets{seq, t}
	}
}

// The sending side.

// siteEntry is this instance's entry for a site, numbered now.
func (s *Server) siteEntry(sum sitetools.LiveSummary, announced bool) dirEntry {
	e := dirEntry{User: sum.UserID, Origin: sum.Origin, Seq: s.dir.seq.Add(1), Tabs: sum.Tabs, URL: sum.URL, Title: clipTitle(sum.Title), Announced: announced}
	if sum.Tabs > 0 {
		e.LastUsed = sum.LastUsed.UnixMilli()
	}
	return e
}

// clipTitle keeps a signal small: a title's first 200 bytes, cut at a
// character boundary.
func clipTitle(t string) string {
	if len(t) <= 200 {
		return t
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut]
}

// siteChanged tells the others a site's documents here changed.
func (s *Server) siteChanged(user, origin string, announced bool) {
	if !s.multi() || s.ctx.Err() != nil { // stopping: dir.gone said it all
		return
	}
	s.signalJSON(topicDir, s.siteEntry(s.catalog.Summary(user, origin), announced))
}

// onHubChange is the hub's OnChange: the pages' events, and the person's
// browser count here for the others.
func (s *Server) onHubChange(uid string, ch bridge.Change) {
	s.hubChanged(uid, ch)
	s.dir.changed()
	if s.multi() && s.ctx.Err() == nil && (ch.Kind == bridge.ChangeConnected || ch.Kind == bridge.ChangeDisconnected) {
		s.signalJSON(topicDir, dirEntry{User: uid, Seq: s.dir.seq.Add(1), Browsers: len(s.hub.Connected(uid))})
	}
}

func (s *Server) signalJSON(topic string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.opts.Logger.Error("encode signal", "topic", topic, "err", err)
		return
	}
	s.signal(topic, b)
}

// snapshot is this instance's whole directory, for a peer that starts or
// resyncs.
func (s *Server) snapshot(ctx context.Context) ([]dirEntry, error) {
	var out []dirEntry
	for _, sum := range s.catalog.Summaries() {
		out = append(out, s.siteEntry(sum, false))
	}
	var users []string
	if err := s.opts.DB.WithContext(ctx).Model(&cluster.Link{}).Distinct("user_id").
		Where("instance_id = ? AND kind = ?", s.id, cluster.LinkBrowser).Pluck("user_id", &users).Error; err != nil {
		return nil, err
	}
	for _, uid := range users {
		if n := len(s.hub.Connected(uid)); n > 0 {
			out = append(out, dirEntry{User: uid, Seq: s.dir.seq.Add(1), Browsers: n})
		}
	}
	return out, nil
}

// The receiving side.

func (s *Server) subscribeDirectory() {
	s.bus.Subscribe(topicDir, func(m cluster.Message) {
		if m.From == s.id {
			return
		}
		var e dirEntry
		if err := json.Unmarshal(m.Data, &e); err != nil {
			s.opts.Logger.Warn("malformed directory signal", "from", m.From, "err", err)
			return
		}
		s.applyEntry(m.From, e)
	})
	s.bus.Subscribe(topicDirGone, func(m cluster.Message) {
		if m.From != s.id {
			s.dir.drop(m.From)
		}
	})
	s.catalog.SetRemote(s.dir)
	s.catalog.OnLiveChange(s.siteChanged)
}

func (s *Server) applyEntry(from string, e dirEntry) {
	if s.dir.apply(from, e) && e.Announced {
		s.catalog.ForgetKnown(e.User, e.Origin)
	}
}

// pullDirectories replaces what this instance knows of every living peer
// with the peer's own snapshot: at start, and after the bus may have
// missed signals.
func (s *Server) pullDirectories(ctx context.Context) {
	var living []cluster.Instance
	if err := s.opts.DB.WithContext(ctx).Where("stopped_at IS NULL AND heartbeat_at > ?", s.opts.Now().UTC().Add(-s.registry.DeadAfter())).Find(&living).Error; err != nil {
		s.opts.Logger.Warn("read the instance registry for the directory", "err", err)
		return
	}
	keep := map[string]bool{}
	var wg sync.WaitGroup
	for _, in := range living {
		keep[in.ID] = true
		if in.ID == s.id || in.Address == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var snap struct {
				Entries []dirEntry `json:"entries"`
			}
			if err := s.in.peers.PostJSON(ctx, in.ID, "/internal/v1/directory", struct{}{}, &snap); err != nil {
				s.opts.Logger.Warn("pull the directory of another instance", "instance", in.ID, "err", err)
				return
			}
			for _, e := range snap.Entries {
				e.Announced = true // its persisted tools may have changed meanwhile
				s.applyEntry(in.ID, e)
			}
		}()
	}
	wg.Wait()
	s.dir.keep(keep)
}

// internalDirectory answers a peer's pull with this instance's snapshot.
// The puller's LISTEN is up before it asks, so what changes here after the
// snapshot reaches it as signals (and this instance, asked, knows it is not
// alone).
func (s *Server) internalDirectory(w http.ResponseWriter, r *http.Request) {
	s.othersSeen()
	entries, err := s.snapshot(r.Context())
	if err != nil {
		s.internalLog(r.Context()).Error("directory snapshot", "err", err)
		writeInternalError(w, http.StatusInternalServerError, codeInternal, "This instance could not read its own links; try again.")
		return
	}
	writeJSON(w, map[string]any{"entries": entries})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
