//go:build !windows

package terminal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// standinAnswer is what the stand-in model streams for every prompt:
// Markdown with a list, wide characters, an emoji and a code block.
var standinAnswer = []string{"Hello! ", "I am a **stand-in** model. ", "Here is a list:\n\n", "- one 日本語\n",
	"- two ✅\n\n", "```go\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n```\n", "Done."}

// standinModelAPI serves, on loopback, just enough of the Anthropic
// Messages API (streamed) and the OpenAI Responses API (streamed) for
// Claude Code and Codex to run a session with no internet, so the recorders
// can drive the agents' real screens. Anything else is answered with {}.
func standinModelAPI(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		event := func(typ string, data map[string]any) {
			data["type"] = typ
			b, _ := json.Marshal(data)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
			w.(http.Flusher).Flush()
		}
		stream := func(delta func(string)) {
			for _, part := range standinAnswer {
				time.Sleep(100 * time.Millisecond) // streamed, as a model's answer arrives
				delta(part)
			}
		}
		sse := func() { w.Header().Set("Content-Type", "text/event-stream") }
		switch {
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/messages/count_tokens"):
			json.NewEncoder(w).Encode(map[string]any{"input_tokens": 10})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/messages" && req.Stream:
			sse()
			event("message_start", map[string]any{"message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
				"model": req.Model, "content": []any{}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
			event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			stream(func(p string) {
				event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": p}})
			})
			event("content_block_stop", map[string]any{"index": 0})
			event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 40}})
			event("message_stop", map[string]any{})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
			json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model,
				"content": []any{map[string]any{"type": "text", "text": "ok"}}, "stop_reason": "end_turn",
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 2}})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
			sse()
			event("response.created", map[string]any{"response": map[string]any{"id": "resp_1", "status": "in_progress", "output": []any{}}})
			event("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "id": "msg_1",
				"role": "assistant", "status": "in_progress", "content": []any{}}})
			stream(func(p string) {
				event("response.output_text.delta", map[string]any{"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": p})
			})
			item := map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": strings.Join(standinAnswer, ""), "annotations": []any{}}}}
			event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
			event("response.completed", map[string]any{"response": map[string]any{"id": "resp_1", "status": "completed", "output": []any{item},
				"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
					"output_tokens": 40, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 50}}})
		default:
			json.NewEncoder(w).Encode(map[string]any{})
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// standinAgents writes a fresh HOME in which Claude Code and Codex start
// straight at their prompt, talking to api (standinModelAPI) in a trusted
// folder, and returns the shell prefix that runs one there.
func standinAgents(t *testing.T, api string) (claude, codex string) {
	home, work := t.TempDir(), t.TempDir()
	const key = "sk-ant-api03-standin-standin-standin"
	cc, _ := json.Marshal(map[string]any{"hasCompletedOnboarding": true, "theme": "dark", "numStartups": 3,
		"customApiKeyResponses": map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
		"projects":              map[string]any{work: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}})
	cx := fmt.Sprintf("model = \"stand-in\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\nname = \"stand-in\"\n"+
		"base_url = \"%s/v1\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_KEY\"\n\n[projects.%q]\ntrust_level = \"trusted\"\n", api, work)
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), cc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(cx), 0o600); err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("cd %s && HOME=%s LANG=C.UTF-8 LC_ALL=C.UTF-8 ", work, home)
	claude = "command -v claude >/dev/null || exit 0; " + env + "ANTHROPIC_BASE_URL=" + api + " ANTHROPIC_API_KEY=" + key +
		" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 exec claude"
	codex = "command -v codex >/dev/null || exit 0; " + env + "STANDIN_KEY=x exec codex"
	return claude, codex
}
