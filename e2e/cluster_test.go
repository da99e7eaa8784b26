package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// readyOf is what /readyz says through haproxy: which instance answered and
// how many its registry counts.
func (c *cluster) readyOf(pin string) (id string, size int) {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.URL+"/readyz", nil)
	if pin != "" {
		req.Header.Set(pinHeader, pin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Instance  string `json:"instance"`
		Instances int    `json:"instances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		c.t.Fatalf("readyz through haproxy: %d %v", resp.StatusCode, err)
	}
	return out.Instance, out.Instances
}

// TestClusterHarness: three instances of the real binary on one PostgreSQL
// behind haproxy; haproxy balances them round-robin request by request, and
// each instance counts all three in its registry.
func TestClusterHarness(t *testing.T) {
	c := startCluster(t, 3)
	seen := map[string]int{}
	for range 6 {
		id, _ := c.readyOf("")
		seen[id]++
	}
	if len(seen) != 3 {
		t.Fatalf("six requests reached %v; want each of three instances twice", seen)
	}
	for _, in := range c.inst {
		testutil.Eventually(t, testutil.WaitShort, func() bool { // the registry counts at its next sweep
			id, size := c.readyOf(in.id)
			if id != in.id {
				t.Fatalf("pinned to %s: answered by %s", in.id, id)
			}
			return size == 3
		}, in.id+" counts three instances")
	}
}

// signalLags renames a machine rounds times, on each instance in turn, and
// waits for every rename to arrive on the person's event stream of every
// instance (failing the test if one does not within the stream's deadline).
// It returns each arrival's lag on another instance: its arrival there less
// its arrival on the stream of the instance that made it.
func signalLags(tb testing.TB, c *cluster, rounds int) []time.Duration {
	person := c.env().Person(tb, "ada@example.com")
	var m struct {
		Machine struct{ ID string } `json:"machine"`
	}
	person.MustJSON("POST", "/api/machines", map[string]string{"name": "laptop"}, 201, &m)
	streams := make([]*events, len(c.inst))
	clients := make([]*servertest.Client, len(c.inst))
	for i, in := range c.inst {
		streams[i] = c.stream(tb, person, in)
		clients[i] = c.pinned(person, in)
	}
	lags := make([]time.Duration, 0, rounds*(len(c.inst)-1))
	for r := range rounds {
		from := r % len(c.inst)
		name := fmt.Sprintf("laptop-%03d", r)
		clients[from].MustJSON("PATCH", "/api/machines/"+m.Machine.ID, map[string]string{"name": name}, 200, nil)
		at := streams[from].when(tb, `"`+name+`"`)
		for i := range c.inst {
			if i != from {
				lags = append(lags, streams[i].when(tb, `"`+name+`"`).Sub(at))
			}
		}
	}
	return lags
}

// TestClusterSignalsArrive: every change made on one instance reaches the
// person's event streams on the other two. How soon is a benchmark's
// measure (BenchmarkClusterSignals), not this test's: a timed assertion
// fails on a loaded machine, not on a slow product.
func TestClusterSignalsArrive(t *testing.T) {
	signalLags(t, startCluster(t, 3), 30) // fails on the first change an instance never hears
}

// BenchmarkClusterSignals reports how long a change made on one of three
// real instances takes to reach the person's event streams on the other
// two (p50, p99), over b.N changes.
//
//	go test ./e2e -run XXX -bench ClusterSignals -benchtime 150x
func BenchmarkClusterSignals(b *testing.B) {
	c := startCluster(b, 3)
	b.ResetTimer()
	lags := signalLags(b, c, b.N)
	b.StopTimer()
	testutil.ReportLatency(b, lags)
}
