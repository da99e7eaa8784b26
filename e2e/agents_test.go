package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tabbridge/tabbridge/internal/testutil"
	"github.com/tabbridge/tabbridge/server"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// agentBin returns the path of an agent's command installed in e2e/agents
// (scripts/test runs 'npm ci' there); without it the test fails in CI and
// is skipped elsewhere.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	bin := repoPath(t, filepath.Join("e2e", "agents", "node_modules", ".bin", name))
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: scripts/test runs 'npm ci' in e2e/agents", name)
		}
		t.Skipf("run 'npm ci' in e2e/agents (scripts/test does) to include this test")
	}
	return bin
}

// claudeCode is Claude Code, the real agent, set up in a fresh home to talk
// to model (a stand-in Messages API) and to reach Tabbridge's /mcp at url
// with token, as a person would configure it: an HTTP MCP server named
// "tabbridge" with the token in a header, in a config file (not on the
// command line).
type claudeCode struct {
	bin, home, work, config string
	env                     []string
}

func newClaudeCode(t *testing.T, model, url, token string) *claudeCode {
	t.Helper()
	c := &claudeCode{bin: agentBin(t, "claude"), home: t.TempDir(), work: t.TempDir()}
	const key = "sk-ant-api03-standin-standin-standin"
	state, _ := json.Marshal(map[string]any{"hasCompletedOnboarding": true, "theme": "dark", "numStartups": 3,
		"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
		"projects":              map[string]any{c.work: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}})
	if err := os.WriteFile(filepath.Join(c.home, ".claude.json"), state, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"tabbridge": map[string]any{
		"type": "http", "url": url + "/mcp", "headers": map[string]string{"Authorization": "Bearer " + token}}}})
	c.config = filepath.Join(c.home, "tabbridge-mcp.json")
	if err := os.WriteFile(c.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(os.Environ(), "HOME="+c.home, "ANTHROPIC_BASE_URL="+model, "ANTHROPIC_API_KEY="+key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "NO_COLOR=1")
	return c
}

// start runs one prompt in print mode with the Tabbridge tools allowed and
// env added to its environment, in the background, until it ends or
// ctx is done; wait returns its result and error.
func (c *claudeCode) start(ctx context.Context, prompt string, env ...string) (wait func(t *testing.T) (string, error)) {
	type ended struct {
		result string
		err    error
	}
	done := make(chan ended, 1)
	go func() {
		r, err := c.exec(ctx, prompt, env...)
		done <- ended{r, err}
	}()
	return func(t *testing.T) (string, error) {
		t.Helper()
		select {
		case e := <-done:
			return e.result, e.err
		case <-time.After(3 * time.Minute):
			t.Fatal("claude -p did not end")
		}
		return "", nil
	}
}

func (c *claudeCode) exec(ctx context.Context, prompt string, env ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, "-p", prompt, "--mcp-config", c.config, "--strict-mcp-config",
		"--allowedTools", "mcp__tabbridge__listSiteTools,mcp__tabbridge__getSiteToolDefinition,mcp__tabbridge__callSiteTool,mcp__tabbridge__createTask,mcp__tabbridge__listTasks,mcp__tabbridge__updateTask",
		"--output-format", "json")
	cmd.Dir, cmd.Env = c.work, append(slices.Clip(c.env), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res struct {
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return "", fmt.Errorf("claude printed %s: %v", out, err)
	}
	if res.IsError {
		return "", fmt.Errorf("claude's run ended in error: %s\nstderr: %s", out, stderr.String())
	}
	return res.Result, nil
}

// TestClaudeCodeThroughTabbridge drives the real Claude Code, its own MCP
// client configured as a person would, through Tabbridge into a real tab of
// real Chromium with the real extension: the model (a stand-in) has it list
// the shared sites, read a tool's schema, run a read in the tab, try a write
// without a task, create a task, and make two writes the person answers —
// Allow once, then Deny — and send a call with wrong arguments. The test
// reads what Claude Code handed back to its model at each step. Then the
// ways Claude Code stops waiting for the person: its own tool timeout (and a
// retry, which rejoins the same card), and its process killed.
func TestClaudeCodeThroughTabbridge(t *testing.T) {
	agentBin(t, "claude")
	w := newWorld(t, func(o *server.Options) { o.ApprovalGrace = 3 * time.Second })
	index := w.site + "/"
	tab := w.b.Tab(t, index)
	d := waitDocument(t, w.b, w.worker, index, "search", "addItem")
	w.shareFromPopup(d.TabID, "search", "addItem")
	secret := w.secretOf(tab)

	call := func(tool string, args map[string]any) map[string]any {
		return map[string]any{"site": w.site, "tool": tool, "arguments": args}
	}
	inTask := func(tool string, args map[string]any) func([]toolResult) map[string]any {
		return func(prior []toolResult) map[string]any {
			in := call(tool, args)
			in["taskId"] = taskIDFrom(prior)
			return in
		}
	}
	t.Run("a session: reads, a write without a task, a write allowed once, one denied, wrong arguments", func(t *testing.T) {
		w.enter(t)
		model := newScriptedModel(t,
			agentStep{Tool: "mcp__tabbridge__listSiteTools", Input: map[string]any{}},
			agentStep{Tool: "mcp__tabbridge__getSiteToolDefinition", Input: map[string]any{"site": w.site, "tool": "addItem"}},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", Input: call("search", map[string]any{"q": "tea"})},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", Input: call("addItem", map[string]any{"text": "tea"})},
			agentStep{Tool: "mcp__tabbridge__createTask", Input: map[string]any{"title": "Put tea on the list"}},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", From: inTask("addItem", map[string]any{"text": "tea"})},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", From: inTask("addItem", map[string]any{"text": "cake"})},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", Input: call("search", map[string]any{"q": 5})},
			agentStep{Text: "Tea is on the list; cake was refused."},
		)
		cc := newClaudeCode(t, model.URL, w.live.env.URL, w.token)
		wait := cc.start(context.Background(), "Put tea on the shop's list.")

		// The person answers the two writes as they arrive in the inbox.
		first := w.pending(1)[0]
		if first.Tool != "addItem" || !strings.Contains(first.Arguments, `"tea"`) {
			t.Fatalf("first request %+v", first)
		}
		w.answer(first.ID, "once")
		testutil.Eventually(t, testutil.WaitMedium, func() bool {
			var out struct {
				Approvals []pendingRequest `json:"approvals"`
			}
			w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
			if len(out.Approvals) == 1 && out.Approvals[0].ID != first.ID {
				if !strings.Contains(out.Approvals[0].Arguments, `"cake"`) {
					t.Fatalf("second request %+v", out.Approvals[0])
				}
				w.answer(out.Approvals[0].ID, "deny")
				return true
			}
			return false
		}, "the second write asks the person")
		final, err := wait(t)
		if err != nil {
			t.Fatal(err)
		}
		if final != "Tea is on the list; cake was refused." {
			t.Errorf("Claude Code's final answer %q", final)
		}

		got := model.Results()
		if len(got) != 8 {
			t.Fatalf("Claude Code returned %d tool results, want 8: %+v", len(got), got)
		}
		want := []struct {
			tool    string
			isError bool
			has     []string
		}{
			{"listSiteTools", false, []string{w.site, `"online":true`, `"addItem"`, `"search"`}},
			{"getSiteToolDefinition", false, []string{`"inputSchema"`, `"text"`}},
			{"callSiteTool", false, []string{secret, `"q":"tea"`}},
			{"callSiteTool", true, []string{"taskId"}},
			{"createTask", false, []string{"Put tea on the list"}},
			{"callSiteTool", false, []string{`"items":["tea"]`}},
			{"callSiteTool", true, []string{"The person denied this call", "not run"}},
			{"callSiteTool", true, []string{"q", "string"}},
		}
		for i, wn := range want {
			r := got[i]
			if r.Tool != "mcp__tabbridge__"+wn.tool || r.IsError != wn.isError {
				t.Errorf("result %d: %s (error %v), want %s (error %v): %s", i, r.Tool, r.IsError, wn.tool, wn.isError, r.Text)
				continue
			}
			for _, h := range wn.has {
				if !strings.Contains(r.Text, h) {
					t.Errorf("result %d (%s) does not contain %q: %s", i, wn.tool, h, r.Text)
				}
			}
		}
		if log := w.pageLog(tab); !slices.Contains(log, "added tea") || slices.Contains(log, "added cake") {
			t.Errorf("the page's log %q: want tea added once and cake not", log)
		}
	})

	t.Run("Claude Code retries after its timeout: the retry finds the same card, and the person's answer reaches it", func(t *testing.T) {
		w.enter(t)
		args := map[string]any{"text": "second try"}
		model := newScriptedModel(t,
			agentStep{Tool: "mcp__tabbridge__createTask", Input: map[string]any{"title": "Try twice"}},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", From: inTask("addItem", args)},
			agentStep{Tool: "mcp__tabbridge__callSiteTool", From: inTask("addItem", args)},
			agentStep{Text: "Added on the second try."},
		)
		cc := newClaudeCode(t, model.URL, w.live.env.URL, w.token)
		// Claude Code gives up after 3 s; the grace (3 s here) is longer than the model's turn, so
		// the retry arrives while the card still waits.
		wait := cc.start(context.Background(), "Add it.", "MCP_TOOL_TIMEOUT=3000")
		p := w.pending(1)[0]
		testutil.Eventually(t, testutil.WaitMedium, func() bool { return len(model.Results()) >= 2 }, "Claude Code's first call times out")
		testutil.Eventually(t, testutil.WaitMedium, func() bool {
			var out struct {
				Approvals []requestState `json:"approvals"`
			}
			w.person.MustJSON("GET", "/api/tasks/"+p.TaskID+"/approvals", nil, 200, &out)
			if len(out.Approvals) != 1 || out.Approvals[0].ID != p.ID {
				t.Fatalf("the retry opened another card: %+v", out.Approvals)
			}
			return out.Approvals[0].Waiters == 1 && out.Approvals[0].AgentGoneAt == nil
		}, "the retry waits on the first card")
		w.answer(p.ID, "once")
		if final, err := wait(t); err != nil || final != "Added on the second try." {
			t.Fatalf("final answer %q (%v)", final, err)
		}
		got := model.Results()
		if len(got) != 3 || !got[1].IsError || got[2].IsError || !strings.Contains(got[2].Text, "second try") {
			t.Fatalf("Claude Code's results %+v: want a timeout, then the allowed call's result", got)
		}
		if n := strings.Count(strings.Join(w.pageLog(tab), "\n"), "added second try"); n != 1 {
			t.Errorf("the page added it %d times, want once", n)
		}
	})

	// Real clients give up on a call without telling the server why (Claude Code's MCP_TOOL_TIMEOUT,
	// or its process ending): the request must leave the person's inbox, and the page never runs it.
	for _, way := range []string{"times out", "is killed"} {
		t.Run("Claude Code "+way+" while the person has not answered: the request is withdrawn", func(t *testing.T) {
			w.enter(t)
			model := newScriptedModel(t,
				agentStep{Tool: "mcp__tabbridge__createTask", Input: map[string]any{"title": "Wait for me"}},
				agentStep{Tool: "mcp__tabbridge__callSiteTool", From: inTask("addItem", map[string]any{"text": "never " + way})},
				agentStep{Text: "The person did not answer."},
			)
			cc := newClaudeCode(t, model.URL, w.live.env.URL, w.token)
			ctx, kill := context.WithCancel(context.Background())
			defer kill()
			wait := cc.start(ctx, "Add it.", "MCP_TOOL_TIMEOUT=3000")
			p := w.pending(1)[0]
			if way == "is killed" {
				kill()
			}
			// The person sees at once that the agent stopped waiting; the request stays for the grace
			// (a retry of the same call would rejoin it), then leaves the inbox.
			testutil.Eventually(t, testutil.WaitMedium, func() bool {
				var out struct {
					Approvals []requestState `json:"approvals"`
				}
				w.person.MustJSON("GET", "/api/tasks/"+p.TaskID+"/approvals", nil, 200, &out)
				return len(out.Approvals) == 1 && out.Approvals[0].AgentGoneAt != nil && out.Approvals[0].Waiters == 0
			}, "the request shows that Claude Code stopped waiting")
			w.pending(0)
			var out struct {
				Approvals []requestState `json:"approvals"`
			}
			w.person.MustJSON("GET", "/api/tasks/"+p.TaskID+"/approvals", nil, 200, &out)
			if len(out.Approvals) != 1 || out.Approvals[0].Status != "withdrawn" {
				t.Fatalf("the request after Claude Code %s: %+v", way, out.Approvals)
			}
			if way == "times out" {
				if final, err := wait(t); err != nil || final != "The person did not answer." {
					t.Errorf("final answer %q (%v)", final, err)
				}
				if got := model.Results(); len(got) != 2 || !got[1].IsError {
					t.Errorf("Claude Code's results %+v: want its call to have failed", got)
				}
			} else if _, err := wait(t); err == nil {
				t.Error("Claude Code killed mid-call ended as if it had finished")
			}
			if log := w.pageLog(tab); slices.Contains(log, "added never "+way) {
				t.Errorf("the page ran a call nobody waited for: %q", log)
			}
		})
	}
}

// taskIDFrom reads the id of the task createTask answered in prior.
func taskIDFrom(prior []toolResult) string {
	for _, r := range slices.Backward(prior) {
		if r.Tool == "mcp__tabbridge__createTask" {
			var out struct {
				TaskID string `json:"taskId"`
			}
			json.Unmarshal([]byte(r.Text), &out)
			return out.TaskID
		}
	}
	return ""
}
