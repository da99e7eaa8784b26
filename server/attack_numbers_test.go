package server_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestTheCardNeverShowsANumberThePageDoesNotGet: a write whose argument is a number a float64
// does not hold exactly — an account or order id past 2^53, a decimal with more digits than a
// double keeps — used to be asked as written: the card showed 9007199254740993, the person
// allowed it, and the page, whose arguments the extension reads with JSON.parse (every number a
// float64, rounded to nearest as strconv.ParseFloat rounds), got 9007199254740992. Such a call
// is now refused before anything is asked, saying which value a browser would read, and nothing
// reaches the browser; a number written another way that a browser reads as the same value
// (1e2, 0.10) still asks, and the call that follows runs.
func TestTheCardNeverShowsANumberThePageDoesNotGet(t *testing.T) {
	storetest.Kinds(t, func(t *testing.T, k storetest.Kind) {
		w := newSiteWorld(t, k, nil, nil)
		w.announce(t, "d1", time.Now())
		for args, reads := range map[string]string{
			`{"item":"tea","qty":9007199254740993}`:                                "9007199254740992",
			`{"item":"tea","qty":12345678901234567890123}`:                         "1.2345678901234568e+22",
			`{"item":"tea","qty":1,"price":1.00000000000000001}`:                   "1",
			`{"item":"tea","qty":1,"note":[0.1000000000000000055511151231257828]}`: "0.1",
		} {
			ch, cancel := w.buyRaw(args)
			var out callOut
			testutil.Eventually(t, testutil.WaitShort, func() bool {
				select {
				case out = <-ch:
					return true
				default:
				}
				var p struct {
					Approvals []pendingView `json:"approvals"`
				}
				w.person.MustJSON("GET", "/api/approvals", nil, 200, &p)
				if len(p.Approvals) == 0 {
					return false
				}
				// Asked: show what the person would approve and what the page would get.
				w.answer(t, p.Approvals[0].ID, "once")
				m, err := w.br.Expect("call", testutil.WaitShort)
				if err != nil {
					t.Fatalf("%s: asked, allowed, and no call: %v", args, err)
				}
				var page map[string]any // as JSON.parse reads it: every number a float64
				if err := json.Unmarshal(m.Arguments, &page); err != nil {
					t.Fatal(err)
				}
				t.Fatalf("%s was asked: the card showed %s and the page got %v", args, p.Approvals[0].Arguments, page)
				return true
			}, "the call neither ended nor asked")
			cancel()
			if out.err != nil {
				t.Fatalf("%s: %v", args, out.err)
			}
			wantError(t, out.res, "could be read two ways", "a browser reads it as "+reads, "nothing was run")
			w.pending(t, 0)
		}
		// Written otherwise, the same value: asked and run.
		ch, cancel := w.buyRaw(`{"item":"tea","qty":1e2,"price":0.10}`)
		defer cancel()
		p := w.pending(t, 1)
		if !strings.Contains(p[0].Arguments, "1e2") {
			t.Errorf("the card shows %s", p[0].Arguments)
		}
		w.answer(t, p[0].ID, "once")
		m, err := w.br.Expect("call", testutil.WaitShort)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Qty, Price float64 }
		if err := json.Unmarshal(m.Arguments, &page); err != nil || page.Qty != 100 || strconv.FormatFloat(page.Price, 'g', -1, 64) != "0.1" {
			t.Fatalf("the page got %s", m.Arguments)
		}
		w.br.Dispatched(m.ID, "d1")
		w.br.Result(m.ID, "bought")
		if res := awaitCall(t, ch); res.IsError || servertest.ResultText(res) != "bought" {
			t.Fatalf("the call after the refused ones: %q", servertest.ResultText(res))
		}
	})
}

// buyRaw calls buy with arguments given as JSON text, sent as written.
func (w *siteWorld) buyRaw(args string) (chan callOut, func()) {
	return callAsync(w.agent, "callSiteTool", map[string]any{"site": shop, "tool": "buy", "taskId": w.task, "arguments": json.RawMessage(args)})
}
