package server

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkToolArguments is the MCP middleware that refuses, for every tool but
// callSiteTool (which reads its own input, exactFields and sitetools'
// checks), arguments the SDK's typed decoding would read one way while the
// agent's transcript, a log or a client's own check reads another: a member
// named twice (the SDK keeps the last: createTask {"title": A, "title": B}
// opened task B while the agent's own record says A), bytes that are not
// UTF-8 or half a surrogate pair (read as U+FFFD, so the person's list shows
// another title than the one sent). Member names in another case need no
// check here: the tools' schemas refuse names they do not list. The refusal
// is a tool error, as the SDK's own schema check answers, so an agent reads
// it as a tool's answer and can call again; that check's own refusal is
// reworded to say the input the tool takes (inputForAgent).
func (s *Server) checkToolArguments(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil || call.Params.Name == "callSiteTool" {
			return next(ctx, method, req)
		}
		if problem := ambiguousArguments(call.Params.Arguments); problem != "" {
			res := &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("%s's arguments could be read two ways, so nothing was done: %s", call.Params.Name, problem))
			return res, nil
		}
		res, err := next(ctx, method, req)
		return inputForAgent(call.Params.Name, res, err)
	}
}

// toolInputs are the inputs of the tools the SDK decodes, as an agent should send them.
var toolInputs = map[string]string{
	"listSiteTools":         `It takes no input: send {}.`,
	"getSiteToolDefinition": `Send {"site": "<origin from listSiteTools>", "tool": "<tool name from listSiteTools>"}.`,
	"createTask":            `Send {"title": "<a short title for the work>"}.`,
	"updateTask":            `Send {"taskId": "<id from createTask>", "status": "<notstarted, ongoing, blocked, completed or rejected>"}.`,
	"listTasks":             `Send {}, or {"before": "<next from the previous listTasks>"} for older tasks.`,
}

// sdkSchemaError heads the SDK's refusal of input that does not fit a tool's schema.
const sdkSchemaError = `validating "arguments": `

// inputForAgent rewrites the SDK's refusal of a tool's input (its schema
// check, in the validator's terms) into what was wrong and what to send.
func inputForAgent(tool string, res mcp.Result, err error) (mcp.Result, error) {
	r, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || !r.IsError || len(r.Content) != 1 || toolInputs[tool] == "" {
		return res, err
	}
	text, ok := r.Content[0].(*mcp.TextContent)
	if !ok || !strings.HasPrefix(text.Text, sdkSchemaError) {
		return res, err
	}
	what := strings.TrimPrefix(strings.TrimPrefix(text.Text, sdkSchemaError), "validating root: ")
	out := &mcp.CallToolResult{}
	out.SetError(fmt.Errorf("%s's input does not fit its schema, so nothing was done: %s. %s", tool, what, toolInputs[tool]))
	return out, nil
}

// ambiguousArguments says what makes a tool's arguments readable two ways,
// or "".
func ambiguousArguments(args []byte) string {
	args = bytes.TrimSpace(args)
	switch {
	case len(args) == 0:
		return ""
	case !utf8.Valid(args):
		return "they hold bytes that are not valid UTF-8; send text as UTF-8"
	case loneHalf(args):
		return "a string holds half of a UTF-16 surrogate pair (an escape such as \\ud800 without its other half), which stands for no character; send the character itself, or both halves"
	}
	if path, key := duplicateMember(args, "arguments", ""); key != "" {
		return fmt.Sprintf("%s has the property %q more than once; send each property once", path, key)
	}
	return ""
}
