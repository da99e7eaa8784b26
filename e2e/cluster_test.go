package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tabbridge/tabbridge/internal/testutil"
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
