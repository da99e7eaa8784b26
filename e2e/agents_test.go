//go:build !windows

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
	"syscall"
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

// realAgent is a real coding agent set up to use Tabbridge: start runs one
// prompt to its end (or until ctx is done) in the background, and wait
// returns its final answer.
type realAgent interface {
	start(ctx context.Context, prompt string) (wait func(t *testing.T) (string, error))
}

// agentKind is one real agent the tests run: how to set one up; whether it
// tells its model which tool results are errors (Codex hands the model the
// result's text only); and whether its own tool timeout cancels the call
// the way a person's cancel would. Claude Code's cancel says "timed out",
// so the server keeps the request for a retry (the grace); Codex's says
// "MCP request cancelled by caller" whatever the cause, so the request is
// withdrawn at once, as a cancel must be, and a retry asks afresh.
type agentKind struct {
	name             string
	bin              string
	flagsErrors      bool
	timeoutIsACancel bool
	// progressRestartsTimeout: the agent restarts its tool timeout on every
	// progress notification (OpenCode), so only a timeout shorter than the
	// server's progress pace (5 s) ever ends a wait for the person.
	progressRestartsTimeout bool
	setUp                   func(t *testing.T, model, url, token string, timeout time.Duration) realAgent
}

var realAgents = []agentKind{
	{name: "Claude Code", bin: "claude", flagsErrors: true, setUp: newClaudeCode},
	{name: "Codex", bin: "codex", timeoutIsACancel: true, setUp: newCodex},
	{name: "Gemini CLI", bin: "gemini", flagsErrors: true, setUp: newGeminiCLI},
	{name: "OpenCode", bin: "opencode", progressRestartsTimeout: true, setUp: newOpenCode},
}

// taskRequests reads the approval requests of a task.
func (w *world) taskRequests(task string) []requestState {
	w.t.Helper()
	var out struct {
		Approvals []requestState `json:"approvals"`
	}
	w.person.MustJSON("GET", "/api/tasks/"+task+"/approvals", nil, 200, &out)
	return out.Approvals
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

func newClaudeCode(t *testing.T, model, url, token string, timeout time.Duration) realAgent {
	t.Helper()
	c := &claudeCode{bin: agentBin(t, "claude")}
	c.home, c.work, c.env = claudeHome(t, model)
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"tabbridge": map[string]any{
		"type": "http", "url": url + "/mcp", "headers": map[string]string{"Authorization": "Bearer " + token}}}})
	c.config = filepath.Join(c.home, "tabbridge-mcp.json")
	if err := os.WriteFile(c.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if timeout > 0 {
		c.env = append(c.env, fmt.Sprintf("MCP_TOOL_TIMEOUT=%d", timeout.Milliseconds()))
	}
	return c
}

// claudeHome is a fresh home in which Claude Code starts straight at its
// prompt in the folder work (onboarding done, the folder trusted, the API
// key accepted), talking to model; env is the environment to run it with.
func claudeHome(t *testing.T, model string) (home, work string, env []string) {
	t.Helper()
	home, work = t.TempDir(), t.TempDir()
	const key = "sk-ant-api03-standin-standin-standin"
	state, _ := json.Marshal(map[string]any{"hasCompletedOnboarding": true, "theme": "dark", "numStartups": 3,
		"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
		"projects":              map[string]any{work: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}})
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), state, 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(os.Environ(), "HOME="+home, "ANTHROPIC_BASE_URL="+model, "ANTHROPIC_API_KEY="+key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "NO_COLOR=1")
	return home, work, env
}

// start runs one prompt in print mode with the Tabbridge tools allowed, in
// the background, until it ends or
// ctx is done; wait returns its result and error.
func (c *claudeCode) start(ctx context.Context, prompt string) (wait func(t *testing.T) (string, error)) {
	return inBackground("claude -p", func() (string, error) { return c.exec(ctx, prompt) })
}

// inBackground runs run in the background; wait returns what it returned,
// failing the test if it has not ended within 3 minutes.
func inBackground(what string, run func() (string, error)) (wait func(t *testing.T) (string, error)) {
	type ended struct {
		result string
		err    error
	}
	done := make(chan ended, 1)
	go func() {
		r, err := run()
		done <- ended{r, err}
	}()
	return func(t *testing.T) (string, error) {
		t.Helper()
		select {
		case e := <-done:
			return e.result, e.err
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s did not end", what)
		}
		return "", nil
	}
}

func (c *claudeCode) exec(ctx context.Context, prompt string) (string, error) {
	args := []string{"-p", prompt, "--output-format", "json",
		"--allowedTools", "mcp__tabbridge__listSiteTools,mcp__tabbridge__getSiteToolDefinition,mcp__tabbridge__callSiteTool,mcp__tabbridge__createTask,mcp__tabbridge__listTasks,mcp__tabbridge__updateTask"}
	if c.config != "" { // else the servers it was configured with (claude mcp add)
		args = append(args, "--mcp-config", c.config, "--strict-mcp-config")
	}
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir, cmd.Env = c.work, c.env
	killGroup(cmd)
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

// TestRealAgentsThroughTabbridge drives real Claude Code, Codex, Gemini CLI
// and OpenCode, each with its own MCP client configured as a person would, through Tabbridge into a real tab of
// real Chromium with the real extension: the model (a stand-in) has it list
// the shared sites, read a tool's schema, run a read in the tab, try a write
// without a task, create a task, and make two writes the person answers —
// Allow once, then Deny — and send a call with wrong arguments. The test
// reads what each agent handed back to its model at each step. Then the
// ways an agent stops waiting for the person: its own tool timeout (and a
// retry, which rejoins the same card), and its process killed.
func TestRealAgentsThroughTabbridge(t *testing.T) {
	for _, a := range realAgents {
		agentBin(t, a.bin)
	}
	w := newWorld(t, func(o *server.Options) { o.ApprovalGrace = 8 * time.Second })
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
	for _, agent := range realAgents {
		t.Run(agent.name, func(t *testing.T) {
			t.Run("a session: reads, a write without a task, a write allowed once, one denied, wrong arguments", func(t *testing.T) {
				w.enter(t)
				// Both agents use the one tab: each adds its own items.
				tea, cake := "tea for "+agent.bin, "cake for "+agent.bin
				model := newScriptedModel(t,
					agentStep{Tool: "listSiteTools", Input: map[string]any{}},
					agentStep{Tool: "getSiteToolDefinition", Input: map[string]any{"site": w.site, "tool": "addItem"}},
					agentStep{Tool: "callSiteTool", Input: call("search", map[string]any{"q": "tea"})},
					agentStep{Tool: "callSiteTool", Input: call("addItem", map[string]any{"text": "tea"})},
					agentStep{Tool: "createTask", Input: map[string]any{"title": "Put tea on the list"}},
					agentStep{Tool: "callSiteTool", From: inTask("addItem", map[string]any{"text": tea})},
					agentStep{Tool: "callSiteTool", From: inTask("addItem", map[string]any{"text": cake})},
					agentStep{Tool: "callSiteTool", Input: call("search", map[string]any{"q": 5})},
					agentStep{Text: "Tea is on the list; cake was refused."},
				)
				cc := agent.setUp(t, model.URL, w.live.env.URL, w.token, 0)
				wait := cc.start(context.Background(), "Put tea on the shop's list.")

				// The person answers the two writes as they arrive in the inbox.
				first := w.agentAsks()
				if first.Tool != "addItem" || !strings.Contains(first.Arguments, tea) {
					t.Fatalf("first request %+v", first)
				}
				w.answer(first.ID, "once")
				testutil.Eventually(t, testutil.WaitMedium, func() bool {
					var out struct {
						Approvals []pendingRequest `json:"approvals"`
					}
					w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
					if len(out.Approvals) == 1 && out.Approvals[0].ID != first.ID {
						if !strings.Contains(out.Approvals[0].Arguments, cake) {
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
					t.Errorf("%s's final answer %q", agent.name, final)
				}

				got := model.Results()
				if len(got) != 8 {
					t.Fatalf("%s returned %d tool results, want 8: %+v", agent.name, len(got), got)
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
					{"callSiteTool", false, []string{`"items":[`, tea}},
					{"callSiteTool", true, []string{"The person denied this call", "not run"}},
					{"callSiteTool", true, []string{"q", "string"}},
				}
				for i, wn := range want {
					r := got[i]
					if r.Tool != wn.tool || (agent.flagsErrors && r.IsError != wn.isError) {
						t.Errorf("result %d: %s (error %v), want %s (error %v): %s", i, r.Tool, r.IsError, wn.tool, wn.isError, r.Text)
						continue
					}
					for _, h := range wn.has {
						if !strings.Contains(r.Text, h) {
							t.Errorf("result %d (%s) does not contain %q: %s", i, wn.tool, h, r.Text)
						}
					}
				}
				if log := w.pageLog(tab); !slices.Contains(log, "added "+tea) || slices.Contains(log, "added "+cake) {
					t.Errorf("the page's log %q: want tea added once and cake not", log)
				}
			})

			t.Run("it retries after its timeout: the person answers one card, and the answer reaches the retry", func(t *testing.T) {
				w.enter(t)
				second := "second try by " + agent.bin
				args := map[string]any{"text": second}
				model := newScriptedModel(t,
					agentStep{Tool: "createTask", Input: map[string]any{"title": "Try twice"}},
					agentStep{Tool: "callSiteTool", From: inTask("addItem", args)},
					agentStep{Tool: "callSiteTool", From: inTask("addItem", args)},
					agentStep{Text: "Added on the second try."},
				)
				// The agent gives up after 6 s; the grace (8 s here) is far longer than the model's turn, so
				// the retry arrives while a card left by a timeout still waits. The retry has the same 6 s
				// for the person's answer and the page's run (3 s was too short on a loaded machine: Claude
				// Code's retry timed out too). OpenCode's timeout restarts on the progress the server sends
				// every 5 s, so it gets 4 s: a longer one would never end its wait.
				timeout := 6 * time.Second
				if agent.progressRestartsTimeout {
					timeout = 4 * time.Second
				}
				cc := agent.setUp(t, model.URL, w.live.env.URL, w.token, timeout)
				// The person's event stream tells the card's states apart in order: a card that
				// still counts the first call (the server has not yet seen it leave) looks just
				// like one the retry rejoined, and answering it in the gap between is refused.
				stream := openEvents(t, w.live.env.URL, w.person.HTTP.Jar, nil)
				wait := cc.start(context.Background(), "Add it.")
				p := w.agentAsks()
				testutil.Eventually(t, testutil.WaitMedium, func() bool { return len(model.Results()) >= 2 }, "the first call times out")
				if !agent.timeoutIsACancel {
					// The retry has joined the card once it counts two calls (the server has not
					// seen the first leave yet), or counts one after it counted none.
					stream.until(t, "the retry joins the card the first call left", func(data []string) bool {
						left := false
						for _, d := range data {
							var r requestState
							if json.Unmarshal([]byte(d), &r) != nil || r.ID != p.ID || r.Status != "pending" {
								continue
							}
							if r.Waiters >= 2 || left && r.Waiters == 1 && r.AgentGoneAt == nil {
								return true
							}
							left = left || r.AgentGoneAt != nil
						}
						return false
					})
				}
				var retry string
				testutil.Eventually(t, testutil.WaitMedium, func() bool {
					reqs := w.taskRequests(p.TaskID)
					open := 0
					for _, r := range reqs {
						if r.Status == "pending" {
							open++
							retry = r.ID
						}
					}
					if open > 1 {
						t.Fatalf("the person is asked twice for one call: %+v", reqs)
					}
					if !agent.timeoutIsACancel {
						if len(reqs) != 1 || reqs[0].ID != p.ID {
							t.Fatalf("the retry opened another card: %+v", reqs)
						}
						return reqs[0].Waiters == 1 && reqs[0].AgentGoneAt == nil
					}
					// The cancel withdrew the first card at once; the retry asks anew.
					return len(reqs) == 2 && reqs[0].Status == "withdrawn" && reqs[0].WithdrawnReason == "cancelled" && open == 1
				}, "the retry waits on one card")
				w.answer(retry, "once")
				if final, err := wait(t); err != nil || final != "Added on the second try." {
					t.Fatalf("final answer %q (%v)", final, err)
				}
				got := model.Results()
				if len(got) != 3 || (agent.flagsErrors && (!got[1].IsError || got[2].IsError)) || !strings.Contains(got[2].Text, second) {
					t.Fatalf("%s's results %+v: want a timeout, then the allowed call's result", agent.name, got)
				}
				if n := strings.Count(strings.Join(w.pageLog(tab), "\n"), "added "+second); n != 1 {
					t.Errorf("the page added it %d times, want once", n)
				}
			})

			t.Run("the server restarts between two of its calls: the next runs", func(t *testing.T) {
				w.enter(t)
				search := func(q string) map[string]any {
					return map[string]any{"site": w.site, "tool": "search", "arguments": map[string]any{"q": q}}
				}
				model := newScriptedModel(t,
					agentStep{Tool: "callSiteTool", Input: search("before")},
					agentStep{Tool: "callSiteTool", Input: search("after"), Before: func() {
						before := w.link().Stats.Welcomes
						w.live.restart()
						w.b.waitJS(t, w.worker, 30*time.Second, fmt.Sprintf(`__tabbridgeTest.link.status().stats.welcomes > %d && __tabbridgeTest.link.status().state === 'open'`, before), nil)
					}},
					agentStep{Text: "Searched twice."},
				)
				cc := agent.setUp(t, model.URL, w.live.env.URL, w.token, 0)
				if final, err := cc.start(context.Background(), "Search twice.")(t); err != nil || final != "Searched twice." {
					t.Fatalf("final answer %q (%v)", final, err)
				}
				got := model.Results()
				if len(got) != 2 || got[0].IsError || got[1].IsError || !strings.Contains(got[0].Text, `"q":"before"`) || !strings.Contains(got[1].Text, `"q":"after"`) {
					t.Fatalf("%s's results across the restart: %+v", agent.name, got)
				}
			})

			// Real clients give up on a call without the person's answer (their own tool timeout, or their
			// process ending): the request must leave the person's inbox, and the page never runs it.
			for _, way := range []string{"times out", "is killed"} {
				t.Run("it "+way+" while the person has not answered: the request is withdrawn", func(t *testing.T) {
					w.enter(t)
					never := agent.bin + " " + way + ", never run"
					model := newScriptedModel(t,
						agentStep{Tool: "createTask", Input: map[string]any{"title": "Wait for me"}},
						agentStep{Tool: "callSiteTool", From: inTask("addItem", map[string]any{"text": never})},
						agentStep{Text: "The person did not answer."},
					)
					cc := agent.setUp(t, model.URL, w.live.env.URL, w.token, 3*time.Second)
					ctx, kill := context.WithCancel(context.Background())
					defer kill()
					wait := cc.start(ctx, "Add it.")
					p := w.agentAsks()
					if way == "is killed" {
						kill()
					}
					if way == "is killed" || !agent.timeoutIsACancel {
						// The person sees at once that the agent stopped waiting; the request stays for the
						// grace (a retry of the same call would rejoin it), then leaves the inbox.
						testutil.Eventually(t, testutil.WaitMedium, func() bool {
							reqs := w.taskRequests(p.TaskID)
							return len(reqs) == 1 && (reqs[0].AgentGoneAt != nil && reqs[0].Waiters == 0 || reqs[0].Status == "withdrawn")
						}, "the request shows that the agent stopped waiting")
					}
					w.pending(0)
					reqs := w.taskRequests(p.TaskID)
					if len(reqs) != 1 || reqs[0].Status != "withdrawn" {
						t.Fatalf("the request after %s %s: %+v", agent.name, way, reqs)
					}
					if why := reqs[0].WithdrawnReason; (why == "cancelled") != (way == "times out" && agent.timeoutIsACancel) {
						t.Errorf("the request after %s %s was withdrawn as %q", agent.name, way, why)
					}
					if way == "times out" {
						if final, err := wait(t); err != nil || final != "The person did not answer." {
							t.Errorf("final answer %q (%v)", final, err)
						}
						if got := model.Results(); len(got) != 2 || (agent.flagsErrors && !got[1].IsError) {
							t.Errorf("%s's results %+v: want its call to have failed", agent.name, got)
						}
					} else if _, err := wait(t); err == nil {
						t.Errorf("%s killed mid-call ended as if it had finished", agent.name)
					}
					if log := w.pageLog(tab); slices.Contains(log, "added "+never) {
						t.Errorf("the page ran a call nobody waited for: %q", log)
					}
				})
			}
		})
	}
}

// taskIDFrom reads the id of the task createTask answered in prior.
func taskIDFrom(prior []toolResult) string {
	for _, r := range slices.Backward(prior) {
		if r.Tool == "createTask" {
			var out struct {
				TaskID string `json:"taskId"`
			}
			// The result's JSON, after whatever the agent wrapped it in (Codex
			// puts "Wall time: … Output:" before it).
			if i := strings.Index(r.Text, "{"); i >= 0 {
				json.NewDecoder(strings.NewReader(r.Text[i:])).Decode(&out)
			}
			return out.TaskID
		}
	}
	return ""
}

// codex is Codex, the real agent, set up in a fresh home to talk to model (a
// stand-in Responses API) and to reach Tabbridge's /mcp at url, the token
// read from an environment variable its config names (bearer_token_env_var),
// as README.md tells a person to configure it: callSiteTool approved in
// Codex itself (the person approves writes in Tabbridge), the other tools
// left to Codex's default, which their annotations decide. A timeout, if
// given, is the server's tool_timeout_sec.
type codex struct {
	bin, home, work string
	env             []string
}

func newCodex(t *testing.T, model, url, token string, timeout time.Duration) realAgent {
	t.Helper()
	c := &codex{bin: agentBin(t, "codex")}
	servers := fmt.Sprintf("[mcp_servers.tabbridge]\nurl = %q\nbearer_token_env_var = \"TABBRIDGE_TOKEN\"\n", url+"/mcp")
	if timeout > 0 {
		servers += fmt.Sprintf("tool_timeout_sec = %g\n", timeout.Seconds())
	}
	servers += codexApproveCalls
	c.home, c.work, c.env = codexHome(t, model, servers)
	c.env = append(c.env, "TABBRIDGE_TOKEN="+token)
	return c
}

// codexApproveCalls is what README.md tells a person to add for Tabbridge:
// Codex leaves the asking to Tabbridge for callSiteTool; the other tools
// run by their annotations.
const codexApproveCalls = "\n[mcp_servers.tabbridge.tools.callSiteTool]\napproval_mode = \"approve\"\n"

// codexHome is a fresh CODEX_HOME whose config talks to model (a stand-in
// Responses API) and trusts the folder work, with servers (TOML, maybe
// empty) added; env is the environment to run Codex with.
func codexHome(t *testing.T, model, servers string) (home, work string, env []string) {
	t.Helper()
	home, work = t.TempDir(), t.TempDir()
	cfg := fmt.Sprintf(`model = "stand-in"
model_provider = "standin"
approval_policy = "never"
sandbox_mode = "read-only"
mcp_oauth_credentials_store = "file"

[model_providers.standin]
name = "stand-in"
base_url = "%s/v1"
wire_api = "responses"
env_key = "STANDIN_KEY"

[projects.%q]
trust_level = "trusted"

%s`, model, work, servers)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, work, append(os.Environ(), "CODEX_HOME="+home, "HOME="+home, "STANDIN_KEY=x", "NO_COLOR=1")
}

// start runs one prompt with codex exec in the background until it ends or
// ctx is done; wait returns its last message and error.
func (c *codex) start(ctx context.Context, prompt string) (wait func(t *testing.T) (string, error)) {
	return inBackground("codex exec", func() (string, error) { return c.exec(ctx, prompt) })
}

// exec runs one prompt with codex exec and returns its last message.
func (c *codex) exec(ctx context.Context, prompt string) (string, error) {
	last := filepath.Join(c.home, fmt.Sprintf("last-%d.txt", time.Now().UnixNano()))
	cmd := exec.CommandContext(ctx, c.bin, "exec", "--skip-git-repo-check", "--output-last-message", last, prompt)
	cmd.Dir, cmd.Env = c.work, c.env
	killGroup(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("codex exec: %v\n%s", err, out)
	}
	msg, err := os.ReadFile(last)
	return strings.TrimSpace(string(msg)), err
}

// killGroup makes cmd's cancel kill its whole process group: npm's codex
// command is a Node wrapper around the native binary, and killing the
// wrapper alone leaves the agent running.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// agentAsks waits for the one request a real agent just started makes the
// person answer, and returns it. Agents start up first, OpenCode slowly (a
// database of its own, its MCP servers, its plugins): over 30 s on a loaded
// machine, so this waits longer than pending does.
func (w *world) agentAsks() pendingRequest {
	w.t.Helper()
	var out struct {
		Approvals []pendingRequest `json:"approvals"`
	}
	testutil.Eventually(w.t, testutil.WaitLong, func() bool {
		w.person.MustJSON("GET", "/api/approvals", nil, 200, &out)
		return len(out.Approvals) == 1
	}, "the agent's request asks the person")
	return out.Approvals[0]
}
