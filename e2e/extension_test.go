package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// detectionStatus is what detection.status() reports.
type detectionStatus struct {
	Wanted     bool     `json:"wanted"`
	Permitted  bool     `json:"permitted"`
	Registered []string `json:"registered"`
	On         bool     `json:"on"`
}

// outcome is what the worker's call resolves with.
type outcome struct {
	OK     bool           `json:"ok"`
	Code   string         `json:"code"`
	Error  string         `json:"error"`
	Result map[string]any `json:"result"`
}

type document struct {
	DocumentID string `json:"documentId"`
	TabID      int    `json:"tabId"`
	Origin     string `json:"origin"`
	URL        string `json:"url"`
	Tools      []struct {
		Name        string `json:"name"`
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	} `json:"tools"`
}

func (d document) toolNames() []string {
	var names []string
	for _, t := range d.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// documentsOf lists the documents the worker tracks for an origin.
func documentsOf(t testing.TB, b *ExtensionBrowser, worker context.Context, origin string) []document {
	t.Helper()
	var docs []document
	b.eval(t, worker, `__tabbridgeTest.ready().then(() => __tabbridgeTest.documents())`, &docs)
	var out []document
	for _, d := range docs {
		if d.Origin == origin {
			out = append(out, d)
		}
	}
	return out
}

// waitDocument waits until the worker tracks a document at url offering every tool named.
func waitDocument(t testing.TB, b *ExtensionBrowser, worker context.Context, url string, tools ...string) document {
	t.Helper()
	cond := fmt.Sprintf(`__tabbridgeTest.documents().find(d => d.url === %q && %s.every(n => d.tools.some(t => t.name === n)))`, url, jsArray(tools))
	var d document
	b.waitJS(t, worker, 10*time.Second, cond, &d)
	return d
}

func jsArray(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

// callTool runs a call through the worker and waits for its outcome.
func callTool(t testing.TB, b *ExtensionBrowser, worker context.Context, origin, tool, args string) outcome {
	t.Helper()
	var o outcome
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.call(%q, %q, %s, 15000)`, origin, tool, args), &o)
	return o
}

// startCall starts a call and returns its id without waiting.
func startCall(t testing.TB, b *ExtensionBrowser, worker context.Context, origin, tool, args string) string {
	t.Helper()
	var id string
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.start(%q, %q, %s, 15000)`, origin, tool, args), &id)
	return id
}

func outcomeOf(t testing.TB, b *ExtensionBrowser, worker context.Context, callID string) outcome {
	t.Helper()
	var o outcome
	b.eval(t, worker, fmt.Sprintf(`__tabbridgeTest.outcome(%q)`, callID), &o)
	return o
}

// pageLog waits until the test site's log has a line containing want.
func pageLog(t testing.TB, b *ExtensionBrowser, tab context.Context, want string) {
	t.Helper()
	b.waitJS(t, tab, 10*time.Second, fmt.Sprintf(`window.testsite && window.testsite.log.some(l => l.includes(%q))`, want), nil)
}

// TestExtensionDetection runs the scenarios of one browser in order: detection is off by default,
// turning it on registers the scripts, and then the observer, bridge and worker carry calls.
func TestExtensionDetection(t *testing.T) {
	b := startExtensionBrowser(t, ChromiumOptions{})
	site := serveTestSite(t)
	worker := b.Worker(t)

	t.Run("off by default", func(t *testing.T) {
		var s detectionStatus
		b.eval(t, worker, `__tabbridgeTest.ready().then(() => __tabbridgeTest.detection())`, &s)
		if s.On || s.Wanted || s.Permitted || len(s.Registered) != 0 {
			t.Fatalf("detection on a fresh profile = %+v, want all off", s)
		}
		var all []string
		b.eval(t, worker, `chrome.scripting.getRegisteredContentScripts().then(l => l.map(s => s.id))`, &all)
		if len(all) != 0 {
			t.Fatalf("registered content scripts = %v, want none", all)
		}
		tab := b.Tab(t, site + "/index.html")
		var names []string
		b.waitJS(t, tab, 5*time.Second, `window.testsite.getTools()`, &names)
		if !slices.Equal(names, []string{"addItem", "goTo", "search", "slow"}) {
			t.Fatalf("the page's own getTools() = %v, want its 4 tools", names)
		}
		var nonce bool
		b.eval(t, tab, `document.documentElement.hasAttribute('data-tabbridge-nonce')`, &nonce)
		if docs := documentsOf(t, b, worker, site); len(docs) != 0 || nonce {
			t.Fatalf("with detection off the worker tracks %v (nonce on page: %v), want nothing", docs, nonce)
		}
	})

	t.Run("turning it on registers both scripts bridge first", func(t *testing.T) {
		b.GrantAllURLs(t)
		var s detectionStatus
		b.eval(t, worker, `__tabbridgeTest.detection()`, &s)
		if s.On || len(s.Registered) != 0 {
			t.Fatalf("after a grant alone detection = %+v; it must wait for the person's switch", s)
		}
		b.EnableDetection(t)
		b.eval(t, worker, `__tabbridgeTest.detection()`, &s)
		if !s.On || !s.Permitted {
			t.Fatalf("after the switch detection = %+v, want on", s)
		}
		type script struct {
			ID        string   `json:"id"`
			JS        []string `json:"js"`
			World     string   `json:"world"`
			RunAt     string   `json:"runAt"`
			AllFrames bool     `json:"allFrames"`
			Matches   []string `json:"matches"`
		}
		var scripts []script
		b.eval(t, worker, `chrome.scripting.getRegisteredContentScripts()`, &scripts)
		if len(scripts) != 2 || scripts[0].ID >= scripts[1].ID || scripts[0].World == "MAIN" || scripts[1].World != "MAIN" {
			t.Fatalf("registered scripts = %+v, want the isolated bridge sorting before the main-world observer", scripts)
		}
		for _, s := range scripts {
			if s.RunAt != "document_start" || s.AllFrames || !slices.Equal(s.Matches, []string{"<all_urls>"}) {
				t.Fatalf("script %+v: want document_start, top frame only, <all_urls>", s)
			}
		}
	})
}
