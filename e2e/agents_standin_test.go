package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// agentStep is one turn of a scripted model: call a tool with an input, or
// (Tool empty) end the turn with Text.
type agentStep struct {
	Tool  string
	Input map[string]any
	// From, if set, builds the input from the results the agent returned
	// so far (a task id the model read from createTask's answer, say).
	From func(prior []toolResult) map[string]any
	Text string
}

// toolResult is what the agent sent back for one of the model's tool calls.
type toolResult struct {
	Tool    string
	Text    string
	IsError bool
}

// scriptedModel is a stand-in for the Anthropic Messages API (streamed and
// not) that answers the agent's main loop — the requests that offer the
// Tabbridge tools — with steps in order, and every other request (titles,
// summaries, quota checks) with a short text. It records the tool results
// the agent returns, so a test reads what the real agent got from its real
// MCP client. It knows the Messages API only as far as Claude Code uses it.
type scriptedModel struct {
	URL     string
	mu      sync.Mutex
	steps   []agentStep
	results []toolResult
	offered []string // the tool names of the last main-loop request
	turns   int
	newStep chan struct{} // a result arrived (buffered; for waiting)
}

func newScriptedModel(t *testing.T, steps ...agentStep) *scriptedModel {
	m := &scriptedModel{steps: steps, newStep: make(chan struct{}, 64)}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range m.Results() {
				t.Logf("the agent's tool result %d: %s (error %v): %.500s", i, r.Tool, r.IsError, r.Text)
			}
		}
	})
	return m
}

type messagesRequest struct {
	Model    string                  `json:"model"`
	Stream   bool                    `json:"stream"`
	Tools    []struct{ Name string } `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// contentBlock is one block of a message's content as the agent sends it.
type contentBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
	Text      string          `json:"text"`
}

func blocksOf(raw json.RawMessage) []contentBlock {
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) == nil {
		return blocks
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	return nil
}

// textOf flattens a tool_result's content (a string, or text blocks).
func textOf(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocksOf(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		json.NewEncoder(w).Encode(map[string]any{})
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1/messages/count_tokens") {
		json.NewEncoder(w).Encode(map[string]any{"input_tokens": 10})
		return
	}
	main := false
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
		if strings.HasPrefix(tl.Name, "mcp__tabbridge__") {
			main = true
		}
	}
	step := agentStep{Text: "ok"}
	if main {
		m.mu.Lock()
		m.offered = names
		// The turn is the number of assistant messages so far; the results
		// are those of the last user message, matched to the tool calls.
		uses := map[string]string{}
		turn := 0
		for _, msg := range req.Messages {
			for _, b := range blocksOf(msg.Content) {
				if b.Type == "tool_use" {
					uses[b.ID] = b.Name
				}
			}
			if msg.Role == "assistant" {
				turn++
			}
		}
		if turn > m.turns || (turn == 0 && m.turns == 0) {
			if n := len(req.Messages); n > 0 && turn > 0 {
				for _, b := range blocksOf(req.Messages[n-1].Content) {
					if b.Type == "tool_result" {
						m.results = append(m.results, toolResult{Tool: uses[b.ToolUseID], Text: textOf(b.Content), IsError: b.IsError})
						select {
						case m.newStep <- struct{}{}:
						default:
						}
					}
				}
			}
			m.turns = turn
		}
		if turn < len(m.steps) {
			step = m.steps[turn]
			if step.From != nil {
				step.Input = step.From(m.results)
			}
		} else {
			step = agentStep{Text: "All done."}
		}
		m.mu.Unlock()
	}
	m.answer(w, req, step, fmt.Sprintf("toolu_%d", len(req.Messages)))
}

// answer writes step as a Messages API response, streamed when asked.
func (m *scriptedModel) answer(w http.ResponseWriter, req messagesRequest, step agentStep, id string) {
	var block map[string]any
	stop := "end_turn"
	if step.Tool != "" {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": id, "name": step.Tool, "input": step.Input}
	} else {
		block = map[string]any{"type": "text", "text": step.Text}
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5}
	if !req.Stream {
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_" + id, "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{block}, "stop_reason": stop, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	event("message_start", map[string]any{"message": map[string]any{"id": "msg_" + id, "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "usage": usage}})
	if step.Tool != "" {
		input, _ := json.Marshal(step.Input)
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": id, "name": step.Tool, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": step.Text}})
	}
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 5}})
	event("message_stop", map[string]any{})
}

// Results returns the tool results the agent sent back so far.
func (m *scriptedModel) Results() []toolResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]toolResult(nil), m.results...)
}

// Offered returns the tool names the agent's last main-loop request offered.
func (m *scriptedModel) Offered() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.offered...)
}
