package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// agentStep is one turn of a scripted model: call a tool with an input, or
// (Tool empty) end the turn with Text. Tool is the MCP tool's own name
// ("callSiteTool"); the model calls it by whatever name the agent offered
// it under (Claude Code's "mcp__tabbridge__callSiteTool", say).
type agentStep struct {
	Tool  string
	Input map[string]any
	// From, if set, builds the input from the results the agent returned
	// so far (a task id the model read from createTask's answer, say).
	From func(prior []toolResult) map[string]any
	// Before, if set, runs (once) before the model answers with this step:
	// what the test does between two turns of the agent.
	Before func()
	Text   string
}

// toolResult is what the agent sent back for one of the model's tool calls.
type toolResult struct {
	Tool    string // the MCP tool's own name
	Text    string
	IsError bool // as the agent flagged it to its model
}

// scriptedModel is a stand-in for a model API — the Anthropic Messages API
// (Claude Code) and the OpenAI Responses API (Codex), streamed and not, as
// far as those agents use them — that answers the agent's main loop, the
// requests that offer the Tabbridge tools, with steps in order, and every
// other request (titles, summaries, quota checks) with a short text. It
// records the tool results the agent returns, so a test reads what the real
// agent got from its own MCP client.
type scriptedModel struct {
	URL     string
	mu      sync.Mutex
	steps   []agentStep
	results []toolResult
	offered []string // the tool names of the last main-loop request
	turns   int      // the turn whose results were recorded last
	started bool     // the first main-loop request came
	// Chat, if set, answers the requests that do not offer Tabbridge's
	// tools (an agent used without them), instead of "ok".
	Chat    string
	prompts []string // the last user text of every request
}

// Prompts returns the last user text of every request so far.
func (m *scriptedModel) Prompts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.prompts...)
}

func newScriptedModel(t *testing.T, steps ...agentStep) *scriptedModel {
	m := &scriptedModel{steps: steps}
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

// bare is an offered tool name without the agent's prefix for its server:
// Claude Code's "mcp__tabbridge__callSiteTool", Codex's namespace
// "mcp__tabbridge" and "callSiteTool", Gemini CLI's
// "mcp_tabbridge_callSiteTool", OpenCode's "tabbridge_callSiteTool".
func bare(name string) string {
	if i := strings.LastIndex(name, "tabbridge_"); i >= 0 {
		return strings.TrimLeft(name[i+len("tabbridge"):], "_")
	}
	if i := strings.LastIndex(name, "__"); i >= 0 {
		return name[i+2:]
	}
	return name
}

// next records the results a main-loop request of turn brings (once per
// turn: an agent may send a turn's request again) and returns the step to
// answer it with, its tool named as offered.
func (m *scriptedModel) next(offered []string, turn int, results []toolResult) agentStep {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offered = offered
	if turn > m.turns || turn == 0 && !m.started {
		m.results = append(m.results, results...)
		m.turns, m.started = turn, true
		if turn < len(m.steps) && m.steps[turn].Before != nil {
			m.mu.Unlock()
			m.steps[turn].Before()
			m.mu.Lock()
		}
	}
	if turn >= len(m.steps) {
		return agentStep{Text: "All done."}
	}
	step := m.steps[turn]
	if step.From != nil {
		step.Input = step.From(m.results)
	}
	if step.Tool != "" {
		for _, name := range offered {
			if bare(name) == step.Tool {
				step.Tool = name
				break
			}
		}
	}
	return step
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/messages/count_tokens"):
		json.NewEncoder(w).Encode(map[string]any{"input_tokens": 10})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		m.messages(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		m.responses(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		m.chatCompletions(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":countTokens"):
		json.NewEncoder(w).Encode(map[string]any{"totalTokens": 10})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1beta/models/"):
		m.generateContent(w, r)
	default:
		json.NewEncoder(w).Encode(map[string]any{})
	}
}

// isMain says whether a request offering these tools is the agent's main
// loop (it offers Tabbridge's).
func isMain(names []string) bool {
	for _, n := range names {
		if bare(n) == "callSiteTool" {
			return true
		}
	}
	return false
}

// sse writes server-sent events, flushing each.
func sse(w http.ResponseWriter) func(typ string, data map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	return func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
}

// The Anthropic Messages API (Claude Code).

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

// textOf flattens content (a string, or text blocks).
func textOf(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocksOf(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (m *scriptedModel) messages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
	}
	m.mu.Lock()
	step := agentStep{Text: "ok"}
	if m.Chat != "" {
		step.Text = m.Chat
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "user" {
		m.prompts = append(m.prompts, textOf(req.Messages[n-1].Content))
	}
	m.mu.Unlock()
	if isMain(names) {
		// The turn is the number of assistant messages so far; the results
		// are those of the last user message, matched to the tool calls.
		uses := map[string]string{}
		turn := 0
		var results []toolResult
		for i, msg := range req.Messages {
			for _, b := range blocksOf(msg.Content) {
				switch {
				case b.Type == "tool_use":
					uses[b.ID] = b.Name
				case b.Type == "tool_result" && i == len(req.Messages)-1:
					results = append(results, toolResult{Tool: bare(uses[b.ToolUseID]), Text: textOf(b.Content), IsError: b.IsError})
				}
			}
			if msg.Role == "assistant" {
				turn++
			}
		}
		step = m.next(names, turn, results)
	}
	id := fmt.Sprintf("toolu_%d", len(req.Messages))
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
	event := sse(w)
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

// The OpenAI Responses API (Codex).

type responsesRequest struct {
	Model string `json:"model"`
	// Tools are functions, or namespaces of functions (Codex offers each
	// MCP server's tools as the namespace "mcp__<server>").
	Tools []struct {
		Type  string                  `json:"type"`
		Name  string                  `json:"name"`
		Tools []struct{ Name string } `json:"tools"`
	} `json:"tools"`
	Input []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
	} `json:"input"`
}

// outputText flattens a function_call_output's output: a string, or
// content items with text.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct{ Text string }
	json.Unmarshal(raw, &items)
	var parts []string
	for _, it := range items {
		parts = append(parts, it.Text)
	}
	return strings.Join(parts, "\n")
}

func (m *scriptedModel) responses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	var names []string
	for _, tl := range req.Tools {
		if tl.Type == "namespace" {
			for _, f := range tl.Tools {
				names = append(names, tl.Name+"__"+f.Name)
			}
			continue
		}
		names = append(names, tl.Name)
	}
	m.mu.Lock()
	step := agentStep{Text: "ok"}
	if m.Chat != "" {
		step.Text = m.Chat
	}
	if n := len(req.Input); n > 0 && req.Input[n-1].Type == "message" && req.Input[n-1].Role == "user" {
		m.prompts = append(m.prompts, outputText(req.Input[n-1].Content))
	}
	m.mu.Unlock()
	turn := 0
	if isMain(names) {
		// The turn is the number of the model's function calls so far (one
		// a turn); the results are the outputs after the last of them.
		calls := map[string]string{}
		var results []toolResult
		for _, it := range req.Input {
			switch it.Type {
			case "function_call":
				calls[it.CallID] = it.Name
				turn++
				results = nil
			case "function_call_output":
				results = append(results, toolResult{Tool: bare(calls[it.CallID]), Text: outputText(it.Output)})
			}
		}
		step = m.next(names, turn, results)
	}
	var item map[string]any
	if step.Tool != "" {
		args, _ := json.Marshal(step.Input)
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", turn), "call_id": fmt.Sprintf("call_%d", turn),
			"name": step.Tool, "arguments": string(args), "status": "completed"}
		if i := strings.LastIndex(step.Tool, "__"); i >= 0 {
			item["namespace"], item["name"] = step.Tool[:i], step.Tool[i+2:]
		}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", turn), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": step.Text, "annotations": []any{}}}}
	}
	event := sse(w)
	id := fmt.Sprintf("resp_%d", turn)
	event("response.created", map[string]any{"response": map[string]any{"id": id, "status": "in_progress", "output": []any{}}})
	event("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	event("response.completed", map[string]any{"response": map[string]any{"id": id, "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}})
}

// dataEvents writes server-sent events that are data lines only (the
// Gemini API's and Chat Completions' streams), flushing each.
func dataEvents(w http.ResponseWriter) func(data any) {
	w.Header().Set("Content-Type", "text/event-stream")
	return func(data any) {
		b, ok := data.([]byte)
		if !ok {
			b, _ = json.Marshal(data)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
}

// stringsIn flattens the strings of a JSON value, in order.
func stringsIn(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, stringsIn(e)...)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var out []string
		for _, k := range keys {
			out = append(out, stringsIn(v[k])...)
		}
		return out
	}
	return nil
}

// The Google Gemini API (Gemini CLI): generateContent and
// streamGenerateContent.

type geminiPart struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct{ Name string } `json:"functionDeclarations"`
	} `json:"tools"`
}

func (m *scriptedModel) generateContent(w http.ResponseWriter, r *http.Request) {
	var req geminiRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	var names []string
	for _, tl := range req.Tools {
		for _, f := range tl.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	m.mu.Lock()
	step := agentStep{Text: "ok"}
	if m.Chat != "" {
		step.Text = m.Chat
	}
	if n := len(req.Contents); n > 0 && req.Contents[n-1].Role == "user" {
		var texts []string
		for _, p := range req.Contents[n-1].Parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		m.prompts = append(m.prompts, strings.Join(texts, "\n"))
	}
	m.mu.Unlock()
	if isMain(names) {
		// The turn is the number of the model's contents with a function
		// call; the results are the function responses after the last.
		turn := 0
		var results []toolResult
		for _, c := range req.Contents {
			for _, p := range c.Parts {
				switch {
				case p.FunctionCall != nil:
					turn++
					results = nil
				case p.FunctionResponse != nil:
					var resp map[string]any
					json.Unmarshal(p.FunctionResponse.Response, &resp)
					_, failed := resp["error"]
					results = append(results, toolResult{Tool: bare(p.FunctionResponse.Name), Text: strings.Join(stringsIn(resp), "\n"), IsError: failed})
				}
			}
		}
		step = m.next(names, turn, results)
	}
	part := map[string]any{"text": step.Text}
	finish := "STOP"
	if step.Tool != "" {
		part = map[string]any{"functionCall": map[string]any{"name": step.Tool, "args": step.Input}}
	}
	resp := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": finish, "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "stand-in",
	}
	if !strings.Contains(r.URL.Path, ":streamGenerateContent") {
		json.NewEncoder(w).Encode(resp)
		return
	}
	dataEvents(w)(resp)
}

// OpenAI Chat Completions (OpenCode's OpenAI-compatible providers).

type chatRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Function struct{ Name string } `json:"function"`
	} `json:"tools"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func (m *scriptedModel) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	m.mu.Lock()
	step := agentStep{Text: "ok"}
	if m.Chat != "" {
		step.Text = m.Chat
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "user" {
		m.prompts = append(m.prompts, textOf(req.Messages[n-1].Content))
	}
	m.mu.Unlock()
	turn := 0
	if isMain(names) {
		// The turn is the number of the model's messages with tool calls;
		// the results are the tool messages after the last.
		calls := map[string]string{}
		var results []toolResult
		for _, msg := range req.Messages {
			switch msg.Role {
			case "assistant":
				if len(msg.ToolCalls) > 0 {
					turn++
					results = nil
				}
				for _, c := range msg.ToolCalls {
					calls[c.ID] = c.Function.Name
				}
			case "tool":
				results = append(results, toolResult{Tool: bare(calls[msg.ToolCallID]), Text: textOf(msg.Content)})
			}
		}
		step = m.next(names, turn, results)
	}
	id := fmt.Sprintf("chatcmpl-%d", turn)
	message := map[string]any{"role": "assistant", "content": step.Text}
	finish := "stop"
	if step.Tool != "" {
		args, _ := json.Marshal(step.Input)
		finish = "tool_calls"
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": fmt.Sprintf("call_%d", turn), "type": "function", "function": map[string]any{"name": step.Tool, "arguments": string(args)}}}}
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !req.Stream {
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}, "usage": usage})
		return
	}
	event := dataEvents(w)
	chunk := func(delta map[string]any, finish any, usage any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	event(chunk(message, nil, nil))
	event(chunk(map[string]any{}, finish, usage))
	event([]byte("[DONE]"))
}
