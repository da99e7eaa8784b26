//go:build !windows

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// geminiCLI is Gemini CLI, the real agent, set up in a fresh home to talk
// to model (a stand-in Gemini API, GOOGLE_GEMINI_BASE_URL, with an API
// key) and to reach Tabbridge's /mcp at url with token, as README.md tells
// a person to: an HTTP MCP server "tabbridge" (httpUrl) in
// ~/.gemini/settings.json with the token in a header read from the
// environment. A timeout, if given, is the server's timeout (ms).
type geminiCLI struct {
	bin, home, work string
	env             []string
}

func newGeminiCLI(t *testing.T, model, url, token string, timeout time.Duration) realAgent {
	t.Helper()
	server := map[string]any{"httpUrl": url + "/mcp", "headers": map[string]string{"Authorization": "Bearer $TABBRIDGE_TOKEN"}}
	if timeout > 0 {
		server["timeout"] = timeout.Milliseconds()
	}
	g := &geminiCLI{bin: agentBin(t, "gemini")}
	g.home, g.work, g.env = geminiHome(t, model, server)
	g.env = append(g.env, "TABBRIDGE_TOKEN="+token)
	return g
}

// geminiHome is a fresh home whose ~/.gemini/settings.json picks API-key
// sign-in and holds the MCP server tabbridge (if not nil), and a trusted
// folder work; env is the environment to run Gemini CLI with, talking to
// model.
func geminiHome(t *testing.T, model string, server map[string]any) (home, work string, env []string) {
	t.Helper()
	home, work = t.TempDir(), t.TempDir()
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	settings := map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}, "folderTrust": map[string]any{"enabled": false}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
	}
	if server != nil {
		settings["mcpServers"] = map[string]any{"tabbridge": server}
	}
	b, _ := json.Marshal(settings)
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return home, work, append(os.Environ(), "HOME="+home, "GEMINI_API_KEY=standin", "GOOGLE_GEMINI_BASE_URL="+model,
		"GEMINI_CLI_NO_RELAUNCH=true", "NO_COLOR=1")
}

// args are the arguments of a headless run of prompt: the model named (so
// that Gemini CLI does not ask a model to pick one), JSON out, Tabbridge's
// tools run without Gemini CLI asking (the person approves writes in
// Tabbridge).
func (g *geminiCLI) args(prompt string) []string {
	return []string{"-m", "gemini-2.5-pro", "-p", prompt, "--output-format", "json",
		"--allowed-mcp-server-names", "tabbridge", "--approval-mode", "yolo"}
}

func (g *geminiCLI) start(ctx context.Context, prompt string) (wait func(t *testing.T) (string, error)) {
	return inBackground("gemini -p", func() (string, error) { return g.exec(ctx, prompt) })
}

// exec runs one prompt headless (-p) with Tabbridge's tools allowed and
// returns its answer.
func (g *geminiCLI) exec(ctx context.Context, prompt string) (string, error) {
	cmd := exec.CommandContext(ctx, g.bin, g.args(prompt)...)
	cmd.Dir, cmd.Env = g.work, g.env
	killGroup(cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("gemini -p: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res struct {
		Response string `json:"response"`
		Error    any    `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return "", fmt.Errorf("gemini printed %s: %v\nstderr: %s", out, err, stderr.String())
	}
	if res.Error != nil {
		return "", fmt.Errorf("gemini's run ended in error: %s\nstderr: %s", out, stderr.String())
	}
	return strings.TrimSpace(res.Response), nil
}

// openCode is OpenCode, the real agent, set up in a fresh home with its
// model a custom OpenAI-compatible provider at model (a stand-in Chat
// Completions API) and Tabbridge's /mcp at url a remote MCP server with
// token in a header read from the environment, in opencode.json, as
// README.md tells a person to.
type openCode struct {
	bin, home, work string
	env             []string
}

func newOpenCode(t *testing.T, model, url, token string, timeout time.Duration) realAgent {
	t.Helper()
	server := map[string]any{"type": "remote", "url": url + "/mcp", "enabled": true,
		"headers": map[string]string{"Authorization": "Bearer {env:TABBRIDGE_TOKEN}"}}
	if timeout > 0 {
		server["timeout"] = timeout.Milliseconds()
	}
	o := &openCode{bin: agentBin(t, "opencode")}
	o.home, o.work, o.env = openCodeHome(t, model, server)
	o.env = append(o.env, "TABBRIDGE_TOKEN="+token)
	return o
}

func openCodeHome(t *testing.T, model string, server map[string]any) (home, work string, env []string) {
	t.Helper()
	home, work = t.TempDir(), t.TempDir()
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"model":      "standin/stand-in",
		"autoupdate": false,
		"share":      "disabled",
		"provider": map[string]any{"standin": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "stand-in",
			"options": map[string]any{"baseURL": model + "/v1", "apiKey": "standin"},
			"models":  map[string]any{"stand-in": map[string]any{"name": "stand-in", "tool_call": true}},
		}},
	}
	if server != nil {
		cfg["mcp"] = map[string]any{"tabbridge": server}
	}
	b, _ := json.Marshal(cfg)
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "opencode.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return home, work, append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1", "NO_COLOR=1",
		// At every start OpenCode installs its plugin package (@opencode-ai/plugin) into its config
		// folder from the npm registry, in the background; the test reaches no registry (the install
		// fails at once and OpenCode carries on, as it does offline).
		"npm_config_registry=http://127.0.0.1:1/")
}

func (o *openCode) start(ctx context.Context, prompt string) (wait func(t *testing.T) (string, error)) {
	return inBackground("opencode run", func() (string, error) { return o.exec(ctx, prompt) })
}

// exec runs one prompt with opencode run and returns its last text.
func (o *openCode) exec(ctx context.Context, prompt string) (string, error) {
	cmd := exec.CommandContext(ctx, o.bin, "run", "--format", "json", prompt)
	cmd.Dir, cmd.Env = o.work, o.env
	killGroup(cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("opencode run: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var last string
	for _, line := range strings.Split(string(out), "\n") {
		var ev struct {
			Type string `json:"type"`
			Part struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"part"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Part.Type == "text" {
			last = ev.Part.Text
		}
	}
	if last == "" {
		return "", fmt.Errorf("opencode run printed no text: %s\nstderr: %s", out, stderr.String())
	}
	return strings.TrimSpace(last), nil
}
