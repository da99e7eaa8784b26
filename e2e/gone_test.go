package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server/servertest"
)

// shareFromPopup shares the test site with the world's workspace from the popup, as the person
// does, and waits until the agent sees it online with the tools named.
func (w *world) shareFromPopup(tabID int, tools ...string) {
	w.t.Helper()
	popup := w.b.Tab(w.t, fmt.Sprintf("chrome-extension://%s/popup/popup.html?tab=%d", ExtensionID, tabID))
	run(w.t, popup, "share the site",
		chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="unshared"]`)),
		chromedp.Click(chromedp.ID("share")),
		chromedp.WaitVisible(chromedp.CSS(`#share-box[data-state="shared"] #unshare`)),
	)
	w.waitOnline(w.agent, tools...)
}

// rawCall sends callSiteTool over a TCP connection of its own in the agent's session, as an
// agent process that may die at any moment would, and returns the connection unread. It sends
// no progress token, and nothing but the request: closing the connection is all it says.
func (w *world) rawCall(tool string, args map[string]any) net.Conn {
	w.t.Helper()
	params, _ := json.Marshal(map[string]any{"site": w.site, "tool": tool, "taskId": w.task, "arguments": args})
	body := `{"jsonrpc":"2.0","id":"raw","method":"tools/call","params":{"name":"callSiteTool","arguments":` + string(params) + `}}`
	host := strings.TrimPrefix(w.live.env.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s",
		host, w.token, w.agent.ID(), len(body), body)
	return conn
}

type requestState struct {
	ID              string     `json:"id"`
	Status          string     `json:"status"`
	Waiters         int        `json:"waiters"`
	AgentGoneAt     *time.Time `json:"agentGoneAt"`
	WithdrawnReason string     `json:"withdrawnReason"`
}

// request reads one request of the world's task.
func (w *world) request(id string) requestState {
	w.t.Helper()
	var out struct {
		Approvals []requestState `json:"approvals"`
	}
	w.person.MustJSON("GET", "/api/tasks/"+w.task+"/approvals", nil, 200, &out)
	for _, r := range out.Approvals {
		if r.ID == id {
			return r
		}
	}
	w.t.Fatalf("no request %s in the task", id)
	return requestState{}
}

type auditRow struct {
	Tool    string `json:"tool"`
	Outcome string `json:"outcome"`
	Error   string `json:"error"`
}

// audit reads the person's audit log, newest first.
func (w *world) audit(tool string) []auditRow {
	w.t.Helper()
	var out struct {
		Entries []auditRow `json:"entries"`
	}
	w.person.MustJSON("GET", "/api/audit?tool="+tool, nil, 200, &out)
	return out.Entries
}

// pageLog is the test page's own log of what its tools did.
func (w *world) pageLog(tab context.Context) []string {
	var log []string
	w.b.eval(w.t, tab, `window.testsite.log`, &log)
	return log
}

// TestDroppedAgentsWriteNeverRunsInThePage: an agent asks for a write, then its connection
// closes without a cancel (it timed out, or its process died). The request shows that the agent
// stopped waiting within a second; when the person then clicks Allow once in the web app, the
// page's tool is not run, and the person reads why.
func TestDroppedAgentsWriteNeverRunsInThePage(t *testing.T) {
	w := newWorld(t)
	index := w.site + "/"
	tab := w.b.Tab(t, index)
	d := waitDocument(t, w.b, w.worker, index, "search", "addItem")
	w.shareFromPopup(d.TabID, "search", "addItem")

	conn := w.rawCall("addItem", map[string]any{"text": "ghost"})
	p := w.pending(1)
	closed := time.Now()
	conn.Close()
	testutil.Eventually(t, testutil.WaitShort, func() bool { return w.request(p[0].ID).AgentGoneAt != nil }, "the request marked as nobody waiting")
	if took := time.Since(closed); took > 2*time.Second { // polled every 50 ms; the server test bounds it at 1 s exactly
		t.Fatalf("the agent was noticed gone %v after it hung up", took)
	}

	// The person answers from the inbox in the browser: the card says the agent went, and the
	// answer runs nothing.
	inbox := w.b.Tab(t, w.live.env.URL+"/")
	run(t, inbox, "allow the abandoned request",
		chromedp.WaitVisible(chromedp.ID("req-"+p[0].ID+"-gone")),
		chromedp.Click(chromedp.ID("ans-"+p[0].ID+"-once")),
		chromedp.WaitVisible(chromedp.ID("page-notice")),
	)
	// The answer's page says it ran nothing.
	if notice := get(t, inbox, "read the notice", chromedp.Text(chromedp.ID("page-notice"))); !strings.Contains(notice, "stopped waiting") || !strings.Contains(notice, "nothing was run") {
		t.Fatalf("after the answer the page says %q", notice)
	}
	if r := w.request(p[0].ID); r.Status != "withdrawn" || r.WithdrawnReason != "gone" {
		t.Fatalf("request after the answer: %+v", r)
	}
	// A read-only call goes through the same browser link: the write did not run before it.
	if r := w.search(w.agent, "after"); r.Q != "after" {
		t.Fatalf("search = %+v", r)
	}
	for _, line := range w.pageLog(tab) {
		if strings.Contains(line, "ghost") {
			t.Fatalf("the page ran the write nobody waited for: %q", w.pageLog(tab))
		}
	}
	if a := w.audit("addItem"); len(a) != 1 || a[0].Outcome != "gone" {
		t.Fatalf("audit of the write: %+v", a)
	}
}

// killableServer is the real tabbridge binary serving on a fixed address and data directory, so
// it can be killed (SIGKILL) and started again as a crashed deployment would be.
type killableServer struct {
	t    *testing.T
	bin  string
	addr string
	dir  string
	cmd  *exec.Cmd
}

func startKillableServer(t *testing.T) *killableServer {
	t.Helper()
	dir := t.TempDir()
	bin := tabbridgeBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &killableServer{t: t, bin: bin, addr: addr, dir: filepath.Join(dir, "data")}
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

// start runs the binary and waits until it answers /readyz.
func (s *killableServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "serve", "--listen", s.addr, "--data-dir", s.dir, "--extension-ids", ExtensionID,
		"--jwt-key", "e2e-signing-key-0123456789abcdef!", "--log-level", "warn")
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	testutil.Eventually(s.t, testutil.WaitMedium, func() bool {
		resp, err := http.Get("http://" + s.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "the server binary ready")
}

// kill ends the binary with SIGKILL: nothing of it runs after, no deferred write, no shutdown.
func (s *killableServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.cmd = nil
}

// TestKilledServerLeavesItsCallsInterrupted: the real server binary is killed (kill -9) while one
// write runs in the page and another waits for the person; started again, its audit log shows
// both calls, interrupted, on the audit page and the task.
func TestKilledServerLeavesItsCallsInterrupted(t *testing.T) {
	bin := startKillableServer(t)
	live := &liveServer{t: t, addr: bin.addr, env: &servertest.Env{URL: "http://" + bin.addr}}
	w := newWorldOn(t, live)
	index := w.site + "/"
	tab := w.b.Tab(t, index)
	d := waitDocument(t, w.b, w.worker, index, "search", "slow", "addItem")
	w.shareFromPopup(d.TabID, "search", "slow", "addItem")

	running, cancelRunning := w.callAsync(w.agent, "slow", map[string]any{"seconds": 60}, true)
	defer cancelRunning()
	w.answer(w.pending(1)[0].ID, "once")
	w.b.waitJS(t, tab, 20*time.Second, `window.testsite.log.some((l) => l.startsWith('slow started'))`, nil)
	asking, cancelAsking := w.callAsync(w.agent, "addItem", map[string]any{"text": "tea"}, true)
	defer cancelAsking()
	w.pending(1)

	bin.kill()
	for _, ch := range []<-chan asyncCall{running, asking} {
		select {
		case <-ch: // the agent saw its connection break
		case <-time.After(30 * time.Second):
			t.Fatal("a call outlived the killed server")
		}
	}
	bin.start()
	w.person = w.signIn()
	for _, tool := range []string{"slow", "addItem"} {
		if a := w.audit(tool); len(a) != 1 || a[0].Outcome != "interrupted" {
			t.Fatalf("audit of %s after the crash: %+v; want one interrupted call", tool, a)
		}
	}
	for _, page := range []string{"/audit", "/tasks/" + w.task} {
		pt := w.b.Tab(t, w.live.env.URL+page)
		w.b.waitJS(t, pt, 20*time.Second, `[...document.querySelectorAll('.badge')].filter((b) => b.textContent === 'Interrupted').length === 2`, nil)
	}
}
