package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

const paceShop = "https://shop.example"

// pacedWorld is a hub whose person shares paceShop, served over an
// in-memory network (so a synctest bubble's clock runs it), with its catalog.
type pacedWorld struct {
	*timedHub
	catalog *sitetools.Catalog
}

// pacedUser is a database whose person shares paceShop. Open it outside a
// synctest bubble: gorm's caches belong to the first bubble that fills them.
func pacedUser(t *testing.T) (*store.DB, string) {
	t.Helper()
	db := storetest.Open(t, storetest.SQLite)
	return db, sharingPerson(t, db, "alice@example.com", paceShop)
}

// sharingPerson makes a person with one workspace that shares origin, and
// returns the person's id.
func sharingPerson(t testing.TB, db *store.DB, email, origin string) string {
	t.Helper()
	ctx := context.Background()
	u, err := db.CreateUser(ctx, email, email, "x")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := db.CreateWorkspace(ctx, u.ID, "Work")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.ShareSite(ctx, u.ID, ws.ID, origin); err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func newPacedWorld(t *testing.T, db *store.DB, user string, pace bridge.Pace) *pacedWorld {
	t.Helper()
	catalog := sitetools.NewCatalog(db, db.Shares)
	hub := bridge.NewHub(bridge.Options{DB: db, Catalog: catalog, AnnouncePace: pace})
	return &pacedWorld{timedHub: serveInMemory(t, hub, user, context.Background()), catalog: catalog}
}

// offers reports whether the catalog has a live document offering tool.
func (w *pacedWorld) offers(tool string) bool {
	return len(w.catalog.Candidates(w.user, paceShop, tool)) > 0
}

// announcement is a tools.announce frame of doc offering one tool.
func announcement(id, doc, tool string) map[string]any {
	return map[string]any{"type": bridge.TypeToolsAnnounce, "id": id, "documentId": doc, "origin": paceShop,
		"url": paceShop + "/" + doc, "title": doc, "tabId": 1, "lastUsed": 0,
		"tools": json.RawMessage(fmt.Sprintf(`[{"name":%q,"description":"d"}]`, tool))}
}

// answer is the server's answer to one announcement, and when it came.
type answer struct {
	m  *bridgetest.Message
	at time.Time
}

// sendAll sends frames on b as fast as the client may and returns the
// answers to them by ref (anything else the server sends is skipped), once
// all have come. It keeps at most 32 announcements unanswered, as a client
// must that reads slower than the server writes (a queue of 64 replies not
// read closes the socket).
func sendAll(t *testing.T, b *bridgetest.Browser, frames []map[string]any) map[string]answer {
	t.Helper()
	window := make(chan struct{}, 32)
	done := make(chan map[string]answer, 1)
	go func() {
		got := map[string]answer{}
		defer func() { done <- got }()
		for len(got) < len(frames) {
			m, err := b.Next(time.Hour)
			if err != nil {
				t.Errorf("after %d answers of %d: %v", len(got), len(frames), err)
				return
			}
			if m.Type != bridge.TypeToolsAccepted && m.Type != bridge.TypeError {
				continue
			}
			if _, dup := got[m.Ref]; dup {
				t.Errorf("%s answered twice", m.Ref)
			}
			got[m.Ref] = answer{m, time.Now()}
			<-window
		}
	}()
	for _, f := range frames {
		select {
		case window <- struct{}{}:
		case got := <-done:
			t.Fatalf("the answers ended after %d", len(got))
		}
		if err := b.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	return <-done
}

// TestAFloodOfOneDocumentIsCoalesced: a client sends 500 announcements of
// one document back to back. The first ones within the pace's burst are
// processed; after that each is held, and one arriving while it waits
// replaces it and answers it superseded. Every announcement is answered,
// far fewer than sent are processed, and the catalog holds the last list.
func TestAFloodOfOneDocumentIsCoalesced(t *testing.T) {
	db, user := pacedUser(t)
	synctest.Test(t, func(t *testing.T) {
		w := newPacedWorld(t, db, user, bridge.Pace{})
		b := w.browser(t)
		const n = 500
		frames := make([]map[string]any, n)
		for i := range frames {
			frames[i] = announcement(fmt.Sprintf("a%d", i), "d1", fmt.Sprintf("v%d", i))
		}
		start := time.Now()
		all := sendAll(t, b, frames)
		elapsed := time.Since(start)
		accepted := 0
		for i := 0; i < n; i++ {
			a, ok := all[fmt.Sprintf("a%d", i)]
			switch {
			case !ok:
				t.Fatalf("a%d was never answered", i)
			case a.m.Type == bridge.TypeToolsAccepted:
				accepted++
			case a.m.Code != bridge.ErrCodeSuperseded || !strings.Contains(a.m.Message, "newer announcement"):
				t.Fatalf("a%d answered %s", i, a.m.Raw)
			}
		}
		p := bridge.DefaultAnnouncePace
		if most := p.Burst + int(p.PerSecond*elapsed.Seconds()) + 1; accepted > most || accepted > n/2 {
			t.Fatalf("%d of %d announcements processed in %v; the pace allows %d", accepted, n, elapsed, most)
		}
		if last := all[fmt.Sprintf("a%d", n-1)]; last.m.Type != bridge.TypeToolsAccepted {
			t.Fatalf("the last announcement: %s", last.m.Raw)
		}
		if !w.offers(fmt.Sprintf("v%d", n-1)) || w.offers(fmt.Sprintf("v%d", n-2)) {
			t.Fatal("the catalog does not hold the last list sent")
		}
		t.Logf("%d of %d processed in %v", accepted, n, elapsed)
	})
}

// TestAFloodOfMadeUpDocumentsIsPaced: 600 announcements, each of a document
// of its own (a client names its own ids), cannot coalesce: they are all
// processed, but at the pace: the burst at once, the rest PerSecond.
func TestAFloodOfMadeUpDocumentsIsPaced(t *testing.T) {
	db, user := pacedUser(t)
	synctest.Test(t, func(t *testing.T) {
		w := newPacedWorld(t, db, user, bridge.Pace{})
		b := w.browser(t)
		const n = 600
		frames := make([]map[string]any, n)
		for i := range frames {
			frames[i] = announcement(fmt.Sprintf("a%d", i), fmt.Sprintf("d%d", i), "search")
		}
		start := time.Now()
		all := sendAll(t, b, frames)
		p := bridge.DefaultAnnouncePace
		for i := 0; i < n; i++ {
			a := all[fmt.Sprintf("a%d", i)]
			if a.m == nil || a.m.Type != bridge.TypeToolsAccepted {
				t.Fatalf("a%d: %+v", i, a.m)
			}
			// By then at most the burst and PerSecond a second were processed.
			if most := p.Burst + int(p.PerSecond*a.at.Sub(start).Seconds()) + 1; i+1 > most {
				t.Fatalf("announcement %d processed %v after the first; the pace allows %d by then", i+1, a.at.Sub(start), most)
			}
		}
		if took, least := time.Since(start), time.Duration(float64(n-p.Burst)/p.PerSecond*float64(time.Second)); took < least {
			t.Fatalf("%d documents processed in %v; the pace takes at least %v", n, took, least)
		}
	})
}

// TestAnHonestPaceIsNeverHeld: what the extension sends is processed at
// once. A reconnect announces 50 documents together; then four pages each
// announce every 250 ms (the extension's own spacing of a document), one
// of them late by up to 100 ms now and then (the network's jitter), for 30
// seconds. Every announcement is accepted without the clock moving.
func TestAnHonestPaceIsNeverHeld(t *testing.T) {
	db, user := pacedUser(t)
	synctest.Test(t, func(t *testing.T) {
		w := newPacedWorld(t, db, user, bridge.Pace{})
		b := w.browser(t)
		frames := make([]map[string]any, 50)
		for i := range frames {
			frames[i] = announcement(fmt.Sprintf("r%d", i), fmt.Sprintf("d%d", i), "search")
		}
		start := time.Now()
		for ref, a := range sendAll(t, b, frames) {
			if a.m.Type != bridge.TypeToolsAccepted || a.at != start {
				t.Fatalf("%s of the reconnect: %s after %v", ref, a.m.Raw, a.at.Sub(start))
			}
		}
		for round := 0; round < 120; round++ {
			jitter := time.Duration(round%3) * 50 * time.Millisecond
			for doc := 0; doc < 4; doc++ {
				if doc == round%4 {
					<-time.After(jitter) // this page's announcement is late: the next comes sooner after it
				}
				sent := time.Now()
				m, err := b.Announce(bridgetest.Doc{ID: fmt.Sprintf("d%d", doc), Origin: paceShop, URL: paceShop + "/", Tools: fmt.Sprintf(`[{"name":"t%d","description":"d"}]`, round)}, time.Hour)
				if err != nil || m.Type != bridge.TypeToolsAccepted || time.Since(sent) != 0 {
					t.Fatalf("round %d, document %d: %+v %v after %v", round, doc, m, err, time.Since(sent))
				}
			}
			<-time.After(250*time.Millisecond - jitter) // the extension's spacing, on the bubble's clock
		}
	})
}

// TestAHeldAnnouncementCountsBeforeItsCallResult: the extension sends a
// page's announcement before its call.result, so that an agent is never
// answered on a list older than the page's. An announcement held back by
// the pace is processed when a call.result arrives, before the call is
// answered.
func TestAHeldAnnouncementCountsBeforeItsCallResult(t *testing.T) {
	db, user := pacedUser(t)
	w := newPacedWorld(t, db, user, bridge.Pace{PerSecond: 0.001, Burst: 1}) // the second announcement waits some 17 minutes
	b := w.browser(t)
	if m, err := b.Announce(bridgetest.Doc{ID: "d1", Origin: paceShop, URL: paceShop + "/d1", Tools: `[{"name":"search","description":"d"}]`}, testutil.WaitShort); err != nil || m.Type != bridge.TypeToolsAccepted {
		t.Fatalf("first announcement: %+v %v", m, err)
	}
	type outcome struct {
		err      error
		checkout bool // the catalog offered the page's new tool when the call returned
	}
	done := make(chan outcome, 1)
	go func() {
		_, err := w.hub.Invoke(context.Background(), w.user, sitetools.Invocation{ID: "c1", Site: paceShop, Tool: "search",
			Arguments: json.RawMessage(`{}`), Deadline: time.Now().Add(time.Minute), Gate: "asked"})
		done <- outcome{err, w.offers("checkout")}
	}()
	if _, err := b.Expect(bridge.TypeCall, testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	// The page registered a tool while it ran the call: its announcement, then its answer.
	if err := b.Send(map[string]any{"type": bridge.TypeToolsAnnounce, "id": "a2", "documentId": "d1", "origin": paceShop, "url": paceShop + "/d1",
		"tools": json.RawMessage(`[{"name":"search","description":"d"},{"name":"checkout","description":"d"}]`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Result("c1", "ok"); err != nil {
		t.Fatal(err)
	}
	out := testutil.RequireReceive(t, testutil.WaitShort, done)
	if out.err != nil || !out.checkout {
		t.Fatalf("the call returned (%v) with the catalog offering checkout: %v", out.err, out.checkout)
	}
	m, err := b.Expect(bridge.TypeToolsAccepted, testutil.WaitShort)
	if err != nil || m.Ref != "a2" {
		t.Fatalf("the held announcement's answer: %+v %v", m, err)
	}
}

// TestDocumentGoneDropsItsHeldAnnouncement: a document that goes while its
// announcement is held leaves nothing behind, and the announcement is
// answered; the socket's end drops what it still holds.
func TestDocumentGoneDropsItsHeldAnnouncement(t *testing.T) {
	db, user := pacedUser(t)
	w := newPacedWorld(t, db, user, bridge.Pace{PerSecond: 0.001, Burst: 1})
	b := w.browser(t)
	if err := b.Send(announcement("a1", "d1", "search")); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(announcement("a2", "d2", "checkout")); err != nil { // held
		t.Fatal(err)
	}
	if err := b.Send(announcement("a3", "d3", "basket")); err != nil { // held
		t.Fatal(err)
	}
	if err := b.Gone("d2"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ ref, typ string }{{"a1", bridge.TypeToolsAccepted}, {"a2", bridge.TypeError}} {
		m, err := b.Next(testutil.WaitShort)
		if err != nil || m.Ref != want.ref || m.Type != want.typ {
			t.Fatalf("want %s answering %s, got %+v %v", want.typ, want.ref, m, err)
		}
		if m.Type == bridge.TypeError && (m.Code != bridge.ErrCodeSuperseded || !strings.Contains(m.Message, "went away")) {
			t.Fatalf("the gone document's announcement: %s", m.Raw)
		}
	}
	if _, err := b.Ping("sync", testutil.WaitShort); err != nil {
		t.Fatal(err)
	}
	if w.offers("checkout") || w.offers("basket") || !w.offers("search") {
		t.Fatal("the catalog holds a held announcement")
	}
	b.Close()
	testutil.Eventually(t, testutil.WaitShort, func() bool { return len(w.hub.Connected(w.user)) == 0 }, "the socket never ended")
	if w.offers("basket") {
		t.Fatal("a held announcement reached the catalog after its socket ended")
	}
}
