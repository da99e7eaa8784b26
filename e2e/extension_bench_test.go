package e2e

import (
	"fmt"
	"testing"
)

// callStats is what one timed run in the browser reports: the calls' own
// latencies, measured in the browser with performance.now().
type callStats struct {
	P50, P99 float64 // ms
	PerSec   float64
	Failed   int
	Error    string
}

// timedCalls is JS that runs n calls of one(i) (a promise; falsy when the
// call failed) with callers of them in flight at once, and resolves with
// callStats.
func timedCalls(one string, n, callers int) string {
	return fmt.Sprintf(`(async () => {
  const one = %s;
  const lat = []; let failed = 0, next = 0, error = '';
  const worker = async () => {
    while (next < %d) {
      const i = next++;
      const t0 = performance.now();
      try { if (!(await one(i))) failed++; } catch (e) { failed++; error = String(e); }
      lat.push(performance.now() - t0);
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: %d }, worker));
  const took = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  return { P50: q(0.5), P99: q(0.99), PerSec: lat.length / took, Failed: failed, Error: error };
})()`, one, n, callers)
}

// BenchmarkExtensionCall is the extension's half of a call (issue 16): the
// worker runs the test site's read-only search tool through the real
// extension in real Chromium — worker → bridge (isolated world) → observer
// (main world) → the page's execute → back — with 1 and 8 callers, and
// beside it the floor: the same page calling the same tool through
// Chromium's own document.modelContext.executeTool. Latencies are taken in
// the browser, so the DevTools protocol adds nothing to either.
//
//	flock /tmp/tb-chromium.lock go test ./e2e -run XXX -bench ExtensionCall -benchtime 2000x
func BenchmarkExtensionCall(b *testing.B) {
	br := startExtensionBrowser(b, ChromiumOptions{})
	site := serveTestSite(b)
	worker := br.Worker(b)
	br.EnableDetection(b)
	tab := br.Tab(b, site+"/")
	waitDocument(b, br, worker, site+"/", "search")
	viaWorker := fmt.Sprintf(`(i) => __tabbridgeTest.call(%q, 'search', { q: 'q' + i }, 15000).then(o => o.ok)`, site)
	floor := `(() => {
  const mc = document.modelContext;
  let tool;
  return async (i) => {
    tool ??= (await mc.getTools()).find(t => t.name === 'search');
    return await mc.executeTool(tool, { q: 'q' + i });
  };
})()`
	br.eval(b, worker, `__tabbridgeTest.ready().then(() => true)`, nil)
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			n := max(b.N, 50)
			var warm, ext, page callStats
			br.eval(b, worker, timedCalls(viaWorker, 50, callers), &warm) // the worker's first calls
			br.eval(b, worker, timedCalls(viaWorker, n, callers), &ext)
			br.eval(b, tab, timedCalls(floor, n, callers), &page)
			for what, s := range map[string]callStats{"extension": ext, "executeTool": page} {
				if s.Failed > 0 {
					b.Fatalf("%s: %d of %d calls failed (%s)", what, s.Failed, n, s.Error)
				}
			}
			b.ReportMetric(ext.P50*1000, "ext-p50-µs")
			b.ReportMetric(ext.P99*1000, "ext-p99-µs")
			b.ReportMetric(ext.PerSec, "ext-calls/s")
			b.ReportMetric(page.P50*1000, "floor-p50-µs")
			b.ReportMetric(page.P99*1000, "floor-p99-µs")
			b.ReportMetric(page.PerSec, "floor-calls/s")
			b.ReportMetric(ext.P50/page.P50, "p50-ratio")
		})
	}
}
