package bridge_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/tabbridge/tabbridge/bridge"
	"github.com/tabbridge/tabbridge/bridge/bridgetest"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// BenchmarkAnnounceFlood: one person's socket sends tools.announce as fast as
// it can for eight seconds (a small list, or the largest: 128 tools, about
// 0.9 MiB; of one document, or of a thousand made-up ones), each list unlike
// the one before so the catalog writes it, while another person announces a
// small list every 100 ms, with the default pace and with none (the server
// before it). It reports the flood's announcements processed per second (over
// the 8 s, and over its second half), the process's CPU per second (the
// flooding client's included) and the other person's latency. See docs/DECISIONS.md, "Caps on what one agent token …".
//
//	go test ./bridge -run XXX -bench AnnounceFlood -benchtime 1x
//
// With TABBRIDGE_TEST_POSTGRES set it runs on PostgreSQL too.
func BenchmarkAnnounceFlood(b *testing.B) {
	kinds := []storetest.Kind{storetest.SQLite}
	if os.Getenv(storetest.EnvPostgres) != "" {
		kinds = append(kinds, storetest.Postgres)
	}
	for _, k := range kinds {
		for _, size := range []string{"small", "large"} {
			for _, docs := range []int{1, 1000} {
				for _, paced := range []bool{false, true} {
					pace := unpaced
					if paced {
						pace = bridge.DefaultAnnouncePace
					}
					b.Run(fmt.Sprintf("%s/%s/docs=%d/paced=%v", k, size, docs, paced), func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							floodOnce(b, k, size == "large", docs, pace)
						}
					})
				}
			}
		}
	}
}

// unpaced is a pace no socket reaches: the server as it was before.
var unpaced = bridge.Pace{PerSecond: 1e9, Burst: 1 << 30, BytesPerSecond: 1 << 40, BytesBurst: 1 << 40}

// floodTools returns two different tool lists of the chosen size.
func floodTools(large bool) [2]string {
	var out [2]string
	for v := range out {
		if !large {
			out[v] = fmt.Sprintf(`[{"name":"search","description":"Search the catalogue, version %d","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"annotations":{"readOnlyHint":true}}]`, v)
			continue
		}
		tools := make([]string, 128)
		for i := range tools {
			props := make([]string, 40)
			for j := range props {
				props[j] = fmt.Sprintf(`"field%02d":{"type":"string","maxLength":100,"description":"%s"}`, j, strings.Repeat("d", 100))
			}
			tools[i] = fmt.Sprintf(`{"name":"tool%03d","description":"version %d %s","inputSchema":{"type":"object","properties":{%s},"required":["field00"]}}`,
				i, v, strings.Repeat("x", 1000), strings.Join(props, ","))
		}
		out[v] = "[" + strings.Join(tools, ",") + "]"
	}
	return out
}

func floodOnce(b *testing.B, k storetest.Kind, large bool, docs int, pace bridge.Pace) {
	db := storetest.Open(b, k)
	const shop = "https://shop.example"
	users := []string{sharingPerson(b, db, "alice@example.com", shop), sharingPerson(b, db, "bob@example.com", shop)}
	url := floodServer(b, db, pace)
	flooder := floodBrowser(b, url, users[0])
	other := floodBrowser(b, url, users[1])

	lists, small := floodTools(large), floodTools(false)
	frames := make([][]byte, 0, 2*docs)
	for i := 0; i < 2*docs; i++ {
		doc := fmt.Sprintf("d%d", i%docs)
		frames = append(frames, []byte(fmt.Sprintf(`{"type":"tools.announce","id":"f%d","documentId":"%s","origin":"%s","url":"%s/%s","title":"t","tabId":1,"lastUsed":0,"tools":%s}`,
			i, doc, shop, shop, doc, lists[i%2])))
	}

	// The flooder keeps at most 32 announcements unanswered, as a client that
	// means to stay connected does: a queue of 64 replies not read closes it.
	inflight := make(chan struct{}, 32)
	// The flooder's answers, counted by kind.
	var answered, accepted atomic.Int64
	codes := sync.Map{}
	readDone := make(chan struct{})
	var readErr error
	go func() {
		defer close(readDone)
		for {
			m, err := flooder.Next(time.Hour)
			if err != nil {
				readErr = err
				return
			}
			switch m.Type {
			case bridge.TypeToolsAccepted:
				accepted.Add(1)
			case bridge.TypeError:
				n, _ := codes.LoadOrStore(m.Code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			default:
				continue
			}
			answered.Add(1)
			<-inflight
		}
	}()

	const window = 8 * time.Second
	start, cpu0 := time.Now(), testutil.CPUTime()
	stop := make(chan struct{})
	var sent atomic.Int64
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-readDone:
				return
			case inflight <- struct{}{}:
			}
			if err := flooder.SendRaw(websocket.TextMessage, frames[i%len(frames)]); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	// The other person announces every 100 ms meanwhile.
	var lat []time.Duration
	tick := time.NewTicker(100 * time.Millisecond)
	var half int64
	for time.Since(start) < window {
		<-tick.C
		if half == 0 && time.Since(start) >= window/2 {
			half = accepted.Load()
		}
		t0 := time.Now()
		m, err := other.Announce(bridgetest.Doc{ID: "o1", Origin: shop, URL: shop + "/", Tools: small[len(lat)%2]}, time.Minute)
		if err != nil || m.Type != bridge.TypeToolsAccepted {
			b.Fatalf("the other person's announcement: %+v %v", m, err)
		}
		lat = append(lat, time.Since(t0))
	}
	tick.Stop()
	elapsed, cpu := time.Since(start), testutil.CPUTime()-cpu0
	processedInWindow := accepted.Load()
	close(stop)
	<-sendDone
	// Every announcement sent is answered, in the end.
	deadline := time.Now().Add(testutil.WaitLong)
	for answered.Load() < sent.Load() && time.Now().Before(deadline) {
		select {
		case <-readDone:
			b.Logf("the flooder's socket ended: %v", readErr)
			deadline = time.Now()
		case <-time.After(10 * time.Millisecond): // a poll, for a benchmark only
		}
	}
	if answered.Load() != sent.Load() {
		b.Logf("%d announcements sent, %d answered", sent.Load(), answered.Load())
	}
	flooder.Close()
	<-readDone

	slices.Sort(lat)
	b.ReportMetric(float64(sent.Load())/elapsed.Seconds(), "sent/s")
	b.ReportMetric(float64(processedInWindow)/elapsed.Seconds(), "processed/s")
	b.ReportMetric(float64(processedInWindow-half)/(elapsed.Seconds()/2), "late-processed/s")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu-s/s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "other-p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1])/1e6, "other-max-ms")
	var byCode []string
	codes.Range(func(k, v any) bool {
		byCode = append(byCode, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	b.Logf("sent %d, accepted %d, errors %v", sent.Load(), accepted.Load(), byCode)
}

// floodServer serves a hub on a loopback listener; the query's user is the
// socket's person.
func floodServer(b *testing.B, db *store.DB, pace bridge.Pace) string {
	hub := bridge.NewHub(bridge.Options{DB: db, Catalog: sitetools.NewCatalog(db, db.Shares), AnnouncePace: pace})
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		hub.Serve(context.Background(), c, r.URL.Query().Get("user"))
	}))
	b.Cleanup(func() { hub.Close(); srv.Close() })
	return srv.URL
}

func floodBrowser(b *testing.B, url, user string) *bridgetest.Browser {
	d := websocket.Dialer{}
	conn, _, err := d.Dial(strings.Replace(url, "http://", "ws://", 1)+"/ws/extension?user="+user, nil)
	if err != nil {
		b.Fatal(err)
	}
	br := &bridgetest.Browser{Conn: conn}
	b.Cleanup(func() { conn.Close() })
	if _, err := br.Hello("browser-"+user, "Chrome", "1.0.0", testutil.WaitShort); err != nil {
		b.Fatal(err)
	}
	return br
}
