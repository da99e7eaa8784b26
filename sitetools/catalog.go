package sitetools

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm/clause"

	"github.com/tabbridge/tabbridge/store"
)

// ErrNotShared is returned when a browser announces tools for a site its
// person has not shared: nothing of it is kept.
var ErrNotShared = errors.New("sitetools: site not shared")

// ErrNoSuchTool is returned when a site does not offer the named tool.
var ErrNoSuchTool = errors.New("sitetools: no such tool")

// Document is one page — one document in one tab of one browser — and the
// tools it registered, as the extension announced it.
type Document struct {
	BrowserID  string
	DocumentID string
	Origin     string
	URL        string
	Title      string
	TabID      int
	LastUsed   time.Time
	Tools      []Descriptor
	// Refused are the tools the page announced that were not taken, each with
	// why, so an agent asking for one is told (RefusedTool).
	Refused []*Refusal
	// Bytes is the size of the announcement's list of tools as it arrived:
	// what the document's tools cost the server, counted against
	// Limits.ToolBytes.
	Bytes int
}

// offers reports whether the document registered a tool named name.
func (d *Document) offers(name string) bool {
	for i := range d.Tools {
		if d.Tools[i].Name == name {
			return true
		}
	}
	return false
}

// SharedFunc reports whether userID shares origin.
type SharedFunc func(ctx context.Context, userID, origin string) (bool, error)

// Catalog knows which tools each shared site offers: live, per browser and
// document, in memory; and, per site, every tool any of its pages offered,
// each with the address of the page that last offered it, in the database,
// so a site whose tabs are all closed still lists every tool and can reopen
// the right page for each.
type Catalog struct {
	db     *store.DB  // static
	shared SharedFunc // static

	// persistMu serialises the read-modify-write of one site's known tools
	// (Announce); it is taken before mu, never while holding it.
	persistMu sync.Mutex

	mu sync.RWMutex
	// docs holds every live document per person; guarded by mu.
	docs map[string]map[docKey]*Document
	// live indexes the same documents per site, keyed by siteKey, for
	// calls; guarded by mu. An entry exists while the site has a document.
	live map[string]*liveSite
	// known caches each site's persisted tools, keyed by siteKey; guarded
	// by mu. This process writes them for the browsers connected to it.
	known map[string]*knownSite

	// remote and onLive tie the catalog to the other instances' (Remote,
	// OnLiveChange); set before use, then static.
	remote RemoteSites
	onLive func(userID, origin string, announced bool)
	limits Limits // set before use, then static
}

// Limits bound what one person's open documents hold in this process's
// memory. The extension's pages are untrusted and each announcement is
// kept until its document goes: without a bound, a client that made up
// documents could grow the server's memory until it died.
type Limits struct {
	// Documents is the most open documents (pages and frames that registered
	// tools) of one person, across their browsers.
	Documents int
	// ToolBytes is the most bytes of tool lists (Document.Bytes) those
	// documents hold together.
	ToolBytes int
}

// The default limits: far more documents than a person keeps open (Chrome
// slows to a crawl well before a thousand tabs), and room for 64 pages each
// announcing the largest list (MaxAnnouncementBytes).
const (
	DefaultMaxDocuments = 1000
	DefaultMaxToolBytes = 64 << 20
)

// LimitError refuses an announcement that would take a person's open
// documents over a Limits bound; nothing is recorded.
type LimitError struct {
	Documents bool // the count of documents, else their bytes
	Limit     int
}

func (e *LimitError) Error() string {
	if e.Documents {
		pages := "pages"
		if e.Limit == 1 {
			pages = "page"
		}
		return fmt.Sprintf("this person's browsers already have %d open %s with tools, the most the server keeps at once, so this page's tools were not recorded. Close tabs of shared sites you no longer use, then reload this page.", e.Limit, pages)
	}
	return fmt.Sprintf("this person's open pages already hold the most tool descriptions the server keeps at once (%s together), so this page's tools were not recorded. Close tabs of shared sites you no longer use, then reload this page.", bytesText(e.Limit))
}

// bytesText writes n in the largest binary unit that divides it.
func bytesText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// SetLimits replaces the default Limits; call it before use.
func (c *Catalog) SetLimits(l Limits) { c.limits = l }

// RemoteSites is what the other instances hold of a person's site: their
// most recently used document of it, and how many they have open.
type RemoteSites interface {
	RemoteSite(userID, origin string) (RemoteSite, bool)
}

// RemoteSite summarises a site's documents on the other instances.
type RemoteSite struct {
	Tabs      int
	LastUsed  time.Time
	URL, Last string // the most recently used document's address and title
}

// SetRemote lets Site, Live and RemoteTabs see the other instances' documents.
func (c *Catalog) SetRemote(r RemoteSites) { c.remote = r }

// OnLiveChange registers fn, told (outside every lock) after a site's live
// documents changed on this instance: announced is set when a document
// announced tools (the persisted tools changed too).
func (c *Catalog) OnLiveChange(fn func(userID, origin string, announced bool)) { c.onLive = fn }

func (c *Catalog) liveChanged(userID, origin string, announced bool) {
	if c.onLive != nil {
		c.onLive(userID, origin, announced)
	}
}

// ForgetKnown drops the cached persisted tools of a site, which another
// instance changed: the next read takes them from the database.
func (c *Catalog) ForgetKnown(userID, origin string) {
	c.mu.Lock()
	delete(c.known, siteKey(userID, origin))
	c.mu.Unlock()
}

// LiveSummary is one site's live documents on this instance.
type LiveSummary struct {
	UserID, Origin string
	Tabs           int
	LastUsed       time.Time
	URL, Title     string
}

// Summary returns a site's live documents on this instance (Tabs 0: none).
func (c *Catalog) Summary(userID, origin string) LiveSummary {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.summaryLocked(userID, origin)
}

func (c *Catalog) summaryLocked(userID, origin string) LiveSummary {
	out := LiveSummary{UserID: userID, Origin: origin}
	if ls := c.live[siteKey(userID, origin)]; ls != nil && len(ls.docs) > 0 {
		out.Tabs, out.LastUsed, out.URL, out.Title = len(ls.docs), ls.docs[0].LastUsed, ls.docs[0].URL, ls.docs[0].Title
	}
	return out
}

// Summaries returns every site with live documents on this instance.
func (c *Catalog) Summaries() []LiveSummary {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]LiveSummary, 0, len(c.live))
	for k := range c.live {
		user, origin, _ := strings.Cut(k, "\x00")
		out = append(out, c.summaryLocked(user, origin))
	}
	return out
}

// AllTargets returns, per tool, where a call of it may go on this instance
// (see Targets); the caller must not change it.
func (c *Catalog) AllTargets(userID, origin string) map[string][]Target {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ls := c.live[siteKey(userID, origin)]; ls != nil {
		return ls.targets
	}
	return nil
}

// RemoteTabs counts the site's documents open on the other instances.
func (c *Catalog) RemoteTabs(userID, origin string) int {
	if c.remote == nil {
		return 0
	}
	r, _ := c.remote.RemoteSite(userID, origin)
	return r.Tabs
}

type docKey struct{ browser, document string }

// knownSite is the persisted record of one person's site.
type knownSite struct {
	tools              []Descriptor
	lastURL, lastTitle string
	// stored is the SHA-256 of the tools' text as the row holds it, so an
	// announcement that changes nothing writes nothing (persist).
	stored [sha256.Size]byte
}

func siteKey(userID, origin string) string { return userID + "\x00" + origin }

// liveSite is one site's open documents, indexed when they change (announce,
// use, unload) so that a call reads its route and the site's tools without
// looking at every document: a call costs the same with 1 or 1,000 open.
// Its slices and map are replaced, never changed in place, so what a reader
// took under the read lock stays valid after it lets go.
type liveSite struct {
	docs []*Document // most recently used first
	// union is every tool the documents offer, sorted by name; where two
	// offer one name, the more recently used one's descriptor.
	union []Descriptor
	// targets lists, per tool, each browser's most recently used document
	// offering it, most recently used first: where a call of it may go.
	targets map[string][]Target
}

// byLastUse orders documents most recently used first.
func byLastUse(docs []*Document) {
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].LastUsed.After(docs[j].LastUsed) })
}

// index rebuilds the site's tool union and call targets from its ordered
// documents.
func (ls *liveSite) index() {
	seen := map[string]bool{}
	var union []Descriptor
	targets := map[string][]Target{}
	browsers := map[string]map[string]bool{} // tool → browsers with a target for it
	for _, d := range ls.docs {
		for _, t := range d.Tools {
			if !seen[t.Name] {
				seen[t.Name] = true
				union = append(union, t)
			}
			if browsers[t.Name] == nil {
				browsers[t.Name] = map[string]bool{}
			}
			if !browsers[t.Name][d.BrowserID] {
				browsers[t.Name][d.BrowserID] = true
				targets[t.Name] = append(targets[t.Name], Target{BrowserID: d.BrowserID, DocumentID: d.DocumentID, LastUsed: d.LastUsed})
			}
		}
	}
	sort.Slice(union, func(i, j int) bool { return union[i].Name < union[j].Name })
	ls.union, ls.targets = union, targets
}

// putLocked adds or replaces one document in its site's index.
func (c *Catalog) putLocked(userID string, d *Document) {
	k := siteKey(userID, d.Origin)
	ls := c.live[k]
	if ls == nil {
		ls = &liveSite{}
		c.live[k] = ls
	}
	docs := make([]*Document, 0, len(ls.docs)+1)
	docs = append(docs, d)
	for _, o := range ls.docs {
		if o.BrowserID != d.BrowserID || o.DocumentID != d.DocumentID {
			docs = append(docs, o)
		}
	}
	byLastUse(docs)
	ls.docs = docs
	ls.index()
}

// dropLocked removes the documents gone reports from a site's index.
func (c *Catalog) dropLocked(userID, origin string, gone func(*Document) bool) {
	k := siteKey(userID, origin)
	ls := c.live[k]
	if ls == nil {
		return
	}
	docs := make([]*Document, 0, len(ls.docs))
	for _, d := range ls.docs {
		if !gone(d) {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		delete(c.live, k)
		return
	}
	ls.docs = docs
	ls.index()
}

// NewCatalog returns an empty live catalog over db.
func NewCatalog(db *store.DB, shared SharedFunc) *Catalog {
	return &Catalog{db: db, shared: shared, docs: map[string]map[docKey]*Document{}, live: map[string]*liveSite{}, known: map[string]*knownSite{},
		limits: Limits{Documents: DefaultMaxDocuments, ToolBytes: DefaultMaxToolBytes}}
}

// siteRow is the persisted tool list of one person's site.
type siteRow struct {
	UserID      string `gorm:"primaryKey"`
	Origin      string `gorm:"primaryKey"`
	Tools       string
	LastURL     string
	LastTitle   string
	AnnouncedAt time.Time
}

func (siteRow) TableName() string { return "site_tools" }

// PageAddress is the address a tool is remembered at: the page's URL without
// its fragment. The query string counts (?id=1 and ?id=2 are two pages, as a
// server sees them); a pushState address is whatever the page's location was
// when it announced. A fragment that is a route of a hash-routed app ("#/cart",
// "#!/cart", as routers in hash mode write them) is kept: there it is the page,
// and without it every route of the app was one address, so each route's
// announcement forgot the others' tools.
func PageAddress(raw string) string {
	i := strings.IndexByte(raw, '#')
	if i < 0 || strings.HasPrefix(raw[i:], "#/") || strings.HasPrefix(raw[i:], "#!") {
		return raw
	}
	return raw[:i]
}

// Announce records what one document offers, replacing what that document
// announced before, and persists the site's known tools: every tool this
// document offers now takes its address, and a tool last offered at this
// address that the document no longer offers is forgotten. A site the person
// has not shared is refused with ErrNotShared and nothing is kept.
func (c *Catalog) Announce(ctx context.Context, userID string, d Document) error {
	ok, err := c.shared(ctx, userID, d.Origin)
	if err != nil {
		return fmt.Errorf("announce: %w", err)
	}
	if !ok {
		return ErrNotShared
	}
	doc := d
	addr := PageAddress(d.URL)
	doc.Tools = make([]Descriptor, len(d.Tools))
	for i, t := range d.Tools {
		t.URL = addr
		doc.Tools[i] = t
	}
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	// Announce runs one at a time (persistMu) and documents only go
	// meanwhile, so what is checked here still holds at the insert below.
	if err := c.withinLimits(userID, &doc); err != nil {
		return err
	}
	known, err := c.knownSite(ctx, userID, d.Origin)
	if err != nil {
		return err
	}
	next := mergeOffered(known.tools, addr, doc.Tools)
	if len(next) > MaxToolsPerSite {
		next = c.makeRoom(userID, &doc, next)
	}
	if len(next) > MaxToolsPerSite {
		// The site's pages together offer too many: keep what was there.
		return refuse(ErrBadAnnouncement, "the site's pages would offer %d tools together; the limit is %d per site", len(next), MaxToolsPerSite)
	}
	c.mu.Lock()
	if c.docs[userID] == nil {
		c.docs[userID] = map[docKey]*Document{}
	}
	if old := c.docs[userID][docKey{d.BrowserID, d.DocumentID}]; old != nil && old.Origin != doc.Origin {
		c.dropLocked(userID, old.Origin, func(o *Document) bool { return o == old })
	}
	c.docs[userID][docKey{d.BrowserID, d.DocumentID}] = &doc
	c.putLocked(userID, &doc)
	c.mu.Unlock()
	err = c.persist(ctx, userID, &doc, known, next)
	c.liveChanged(userID, d.Origin, true)
	return err
}

// withinLimits refuses d when the person's open documents, with d in place
// of what its document announced before, would exceed c.limits.
func (c *Catalog) withinLimits(userID string, d *Document) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	docs := c.docs[userID]
	k := docKey{d.BrowserID, d.DocumentID}
	n, size := len(docs), d.Bytes
	if _, again := docs[k]; !again {
		n++
	}
	if n > c.limits.Documents {
		return &LimitError{Documents: true, Limit: c.limits.Documents}
	}
	for dk, o := range docs {
		if dk != k {
			size += o.Bytes
		}
	}
	if size > c.limits.ToolBytes {
		return &LimitError{Limit: c.limits.ToolBytes}
	}
	return nil
}

// makeRoom drops from next, a site's known tools over the cap, those that only
// memory holds — no open page of the site offers them, here or in d — until the
// cap is met or none is left: a page that is open now always counts for more
// than one that offered other tools once (a renamed tool, a route not visited
// since), which would otherwise keep every new page of the site from being
// shared. It drops from the end of the name order, so the same tools go each
// time. The live pages' own tools are never dropped: more of those than the
// cap is still refused.
func (c *Catalog) makeRoom(userID string, d *Document, next []Descriptor) []Descriptor {
	live := map[string]bool{}
	for _, t := range d.Tools {
		live[t.Name] = true
	}
	c.mu.RLock()
	for k, o := range c.docs[userID] {
		if o.Origin == d.Origin && k != (docKey{d.BrowserID, d.DocumentID}) {
			for _, t := range o.Tools {
				live[t.Name] = true
			}
		}
	}
	c.mu.RUnlock()
	out := slices.Clone(next)
	for i := len(out) - 1; i >= 0 && len(out) > MaxToolsPerSite; i-- {
		if !live[out[i].Name] {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// mergeOffered returns the known tools after a page at addr announced
// offered: offered first-hand, then every other known tool not last offered
// at addr, sorted by name.
func mergeOffered(known []Descriptor, addr string, offered []Descriptor) []Descriptor {
	out := append([]Descriptor(nil), offered...)
	names := make(map[string]bool, len(offered))
	for _, t := range offered {
		names[t.Name] = true
	}
	for _, t := range known {
		if !names[t.Name] && t.URL != addr {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// knownSite returns a site's persisted record, from the cache or the
// database. Tools persisted before addresses were kept per tool take the
// site's last address.
func (c *Catalog) knownSite(ctx context.Context, userID, origin string) (*knownSite, error) {
	c.mu.RLock()
	k := c.known[siteKey(userID, origin)]
	c.mu.RUnlock()
	if k != nil {
		return k, nil
	}
	var row siteRow
	err := c.db.WithContext(ctx).Where("user_id = ? AND origin = ?", userID, origin).Limit(1).Find(&row).Error
	if err != nil {
		return nil, fmt.Errorf("read site tools: %w", err)
	}
	k = &knownSite{lastURL: row.LastURL, lastTitle: row.LastTitle, stored: sha256.Sum256([]byte(row.Tools))}
	if k.tools, err = decodeStoredTools(row.Tools, origin, row.LastURL); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.known[siteKey(userID, origin)] = k
	c.mu.Unlock()
	return k, nil
}

// decodeStoredTools reads a site row's tools back through the checks an
// announcement passes (CheckDescriptor), since what a row holds is data read
// back, written by this or an older version under other rules, or changed
// by hand: a descriptor they refuse is not offered (as a page's would not
// be), nor a second one of a name. A tool's address is kept only when it is
// an http(s) address on the site's origin; else, or when the row is older
// than addresses kept per tool, it is the site's last address. Only a row
// whose tools are not a JSON list at all is an error.
func decodeStoredTools(raw, origin, lastURL string) ([]Descriptor, error) {
	if raw == "" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		return nil, fmt.Errorf("decode site tools of %s: the stored list is not a JSON array (%v)", origin, err)
	}
	tools := make([]Descriptor, 0, min(len(items), MaxToolsPerSite))
	seen := map[string]bool{}
	for _, item := range items {
		if len(tools) == MaxToolsPerSite {
			break
		}
		d, err := CheckDescriptor(item)
		if err != nil || seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		var at struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(item, &at) // an object: CheckDescriptor read it
		d.URL = PageAddress(lastURL)
		if u, err := url.Parse(at.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Scheme+"://"+u.Host == origin && u.User == nil {
			d.URL = PageAddress(at.URL)
		}
		tools = append(tools, d)
	}
	return tools, nil
}

// persist writes a site's known tools (up to MaxToolsPerSite descriptors,
// megabytes) and the page that announced them last, as far as they changed
// since known (what this process last read or wrote): a busy site's every
// page load then writes nothing, or only its last page, rather than its whole
// catalog again. announced_at is when the row last changed.
func (c *Catalog) persist(ctx context.Context, userID string, d *Document, known *knownSite, tools []Descriptor) error {
	if tools == nil {
		tools = []Descriptor{}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return fmt.Errorf("persist tools: %w", err)
	}
	next := &knownSite{tools: tools, lastURL: d.URL, lastTitle: d.Title, stored: sha256.Sum256(b)}
	db := c.db.WithContext(ctx)
	write := next.stored != known.stored
	if !write && (next.lastURL != known.lastURL || next.lastTitle != known.lastTitle) {
		res := db.Model(&siteRow{}).Where("user_id = ? AND origin = ?", userID, d.Origin).
			Updates(map[string]any{"last_url": d.URL, "last_title": d.Title, "announced_at": store.Now()})
		err, write = res.Error, res.Error == nil && res.RowsAffected == 0 // the row went: write it whole
	}
	if write {
		row := siteRow{UserID: userID, Origin: d.Origin, Tools: string(b), LastURL: d.URL, LastTitle: d.Title, AnnouncedAt: store.Now()}
		err = db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.known, siteKey(userID, d.Origin)) // read it again next time
		return fmt.Errorf("persist tools: %w", err)
	}
	c.known[siteKey(userID, d.Origin)] = next
	return nil
}

// Forget drops one document (it unloaded or its tab closed) and returns its
// site; ok is false when the document was not known.
func (c *Catalog) Forget(userID, browserID, documentID string) (origin string, ok bool) {
	c.mu.Lock()
	k := docKey{browserID, documentID}
	d := c.docs[userID][k]
	if d == nil {
		c.mu.Unlock()
		return "", false
	}
	delete(c.docs[userID], k)
	c.dropLocked(userID, d.Origin, func(o *Document) bool { return o == d })
	c.mu.Unlock()
	c.liveChanged(userID, d.Origin, false)
	return d.Origin, true
}

// ForgetBrowser drops every document of a browser that disconnected.
func (c *Catalog) ForgetBrowser(userID, browserID string) {
	c.mu.Lock()
	origins := map[string]bool{}
	defer func() {
		c.mu.Unlock()
		for origin := range origins {
			c.liveChanged(userID, origin, false)
		}
	}()
	for k, d := range c.docs[userID] {
		if k.browser == browserID {
			delete(c.docs[userID], k)
			origins[d.Origin] = true
		}
	}
	for origin := range origins {
		c.dropLocked(userID, origin, func(d *Document) bool { return d.BrowserID == browserID })
	}
	if len(c.docs[userID]) == 0 {
		delete(c.docs, userID)
	}
}

// ForgetSite drops every live document of a site the person stopped sharing.
func (c *Catalog) ForgetSite(userID, origin string) {
	c.mu.Lock()
	defer c.liveChanged(userID, origin, false)
	defer c.mu.Unlock()
	delete(c.known, siteKey(userID, origin))
	delete(c.live, siteKey(userID, origin))
	for k, d := range c.docs[userID] {
		if d.Origin == origin {
			delete(c.docs[userID], k)
		}
	}
}

// Use records that a document was used (its tab focused) at t.
func (c *Catalog) Use(userID, browserID, documentID string, t time.Time) {
	c.mu.Lock()
	d := c.docs[userID][docKey{browserID, documentID}]
	if d == nil || !t.After(d.LastUsed) {
		c.mu.Unlock()
		return
	}
	// A new Document, so that one a reader holds does not change under it.
	used := *d
	used.LastUsed = t
	c.docs[userID][docKey{browserID, documentID}] = &used
	c.putLocked(userID, &used)
	c.mu.Unlock()
	c.liveChanged(userID, d.Origin, false)
}

// Candidates returns the live documents of a site that offer tool, most
// recently used first: the call goes to the first whose browser is connected.
func (c *Catalog) Candidates(userID, origin, tool string) []Document {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Document
	if ls := c.live[siteKey(userID, origin)]; ls != nil {
		for _, d := range ls.docs {
			if d.offers(tool) {
				out = append(out, *d)
			}
		}
	}
	return out
}

// Targets returns where a call of tool on a site may go: for each browser
// with a live document offering it, its most recently used such document,
// most recently used first. It reads an index kept when documents change,
// so its cost does not grow with the number of open documents; the caller
// must not change the slice.
func (c *Catalog) Targets(userID, origin, tool string) []Target {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ls := c.live[siteKey(userID, origin)]; ls != nil {
		return ls.targets[tool]
	}
	return nil
}

// OpenTabs counts the live documents of a site per browser.
func (c *Catalog) OpenTabs(userID, origin string) map[string]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]int{}
	if ls := c.live[siteKey(userID, origin)]; ls != nil {
		for _, d := range ls.docs {
			out[d.BrowserID]++
		}
	}
	return out
}

// Opened is how many live documents of a site one browser has, and when
// one of them was last used.
type Opened struct {
	Tabs     int
	LastUsed time.Time
}

// OpenIn summarises the live documents of a site per browser.
func (c *Catalog) OpenIn(userID, origin string) map[string]Opened {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]Opened{}
	if ls := c.live[siteKey(userID, origin)]; ls != nil {
		for _, d := range ls.docs {
			o := out[d.BrowserID]
			o.Tabs++
			if d.LastUsed.After(o.LastUsed) {
				o.LastUsed = d.LastUsed
			}
			out[d.BrowserID] = o
		}
	}
	return out
}

// Site is what the catalog knows of one site.
type Site struct {
	Origin    string
	Tools     []Descriptor
	LastURL   string
	LastTitle string
	// Live is true when at least one open document announced the tools.
	Live bool
}

// Site returns a site's tools: every tool any of its pages offered (see
// Announce), where a tool an open document offers now takes that
// document's descriptor (the most recently used one's, when several do).
// Live says whether a document of the site is open. A site never announced
// has no tools.
func (c *Catalog) Site(ctx context.Context, userID, origin string) (Site, error) {
	known, err := c.knownSite(ctx, userID, origin)
	if err != nil {
		return Site{}, err
	}
	var live []Descriptor
	var latest *Document
	c.mu.RLock()
	if ls := c.live[siteKey(userID, origin)]; ls != nil {
		live, latest = ls.union, ls.docs[0]
	}
	c.mu.RUnlock()
	s := Site{Origin: origin, Tools: mergeLive(known.tools, live), LastURL: known.lastURL, LastTitle: known.lastTitle}
	if latest != nil {
		s.LastURL, s.LastTitle, s.Live = latest.URL, latest.Title, true
	}
	if c.remote != nil {
		if r, ok := c.remote.RemoteSite(userID, origin); ok && r.Tabs > 0 && (latest == nil || r.LastUsed.After(latest.LastUsed)) {
			s.LastURL, s.LastTitle, s.Live = r.URL, r.Last, true
		}
	}
	return s, nil
}

// RefusedTool finds an open page of a person's site that announced a tool named
// name which was refused, and returns the page's address and the reason; ok is
// false when no open page of this process did.
func (c *Catalog) RefusedTool(userID, origin, name string) (url, reason string, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, d := range c.docs[userID] {
		if d.Origin != origin {
			continue
		}
		for _, r := range d.Refused {
			if r.Tool == name {
				return d.URL, r.Reason, true
			}
		}
	}
	return "", "", false
}

// mergeLive lays the live documents' descriptors over the known ones.
func mergeLive(known, live []Descriptor) []Descriptor {
	if len(live) == 0 {
		return known
	}
	byName := make(map[string]Descriptor, len(known)+len(live))
	for _, t := range known {
		byName[t.Name] = t
	}
	for _, t := range live {
		byName[t.Name] = t
	}
	out := make([]Descriptor, 0, len(byName))
	for _, t := range byName {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tool returns one tool of a site, live or persisted, or ErrNoSuchTool.
func (s Site) Tool(name string) (Descriptor, error) {
	for _, t := range s.Tools {
		if t.Name == name {
			return t, nil
		}
	}
	return Descriptor{}, ErrNoSuchTool
}

// Names lists the site's tool names, sorted.
func (s Site) Names() []string {
	out := make([]string, 0, len(s.Tools))
	for _, t := range s.Tools {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}
