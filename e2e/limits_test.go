package e2e

import (
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/sitetools"
)

// TestExtensionTakesTheServersLimits: the real worker, welcomed by a server whose calls run at
// most 45 s (not protocol 1's 60 s), checks with the server's limits and keeps them in
// storage.local, where the content scripts read them (docs/PROTOCOL.md, welcome).
func TestExtensionTakesTheServersLimits(t *testing.T) {
	w := newWorld(t, func(o *server.Options) { o.CallTimeout = 45 * time.Second })
	w.b.eval(t, w.worker, `__tabbridgeTest.ready().then(() => { __tabbridgeTest.link.kick(); return true; })`, nil)
	var kept map[string]float64
	w.b.waitJS(t, w.worker, 30*time.Second, `chrome.storage.local.get('limits').then(v => v.limits && v.limits.callTimeoutMs === 45000 && v.limits)`, &kept)
	if kept["maxResultBytes"] != sitetools.MaxResultBytes || kept["maxToolsPerSite"] != sitetools.MaxToolsPerSite || kept["maxMessageBytes"] != 1<<20 {
		t.Fatalf("kept limits %v, want the server's", kept)
	}
	var used float64
	w.b.eval(t, w.worker, `TabbridgeMessages.limits.callTimeoutMs`, &used)
	if used != 45000 {
		t.Fatalf("the worker checks with a call timeout of %v ms, want the server's 45000", used)
	}
}
