package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP prelude: every MCP POST's body is read here once, before the SDK
// reads it, so that the server and the SDK read one message the same way
// (docs/DECISIONS.md, "One reading of a JSON-RPC message"). The SDK's
// decoder turns a numeric id into an int64 through a float64 (1.5 answers
// as 1, 2^53+1 as 2^53), takes "id": null for a notification, keeps the
// last of two members with one name, and answers a bad id with a plain-text
// 400; this server's own readers (the connection watch, cancels) read the
// same bytes with encoding/json, which also matches "Method" for "method".
// Such a message is refused whole, with a JSON-RPC error that says what is
// wrong, and nothing of it runs.

// maxSafeID is the largest integer id every client's numbers hold exactly
// (a JavaScript number, the SDK's float64).
const maxSafeID = 1<<53 - 1

// maxIDBytes bounds a string id (as JSON, quotes and escapes included). An
// id is held while its request runs, sent back with its answer and every
// progress notification, and kept with a resumable stream's events, so an
// id of megabytes would be copied that often; real clients send integers
// or ids of a few dozen characters.
const maxIDBytes = 1024

// envelopeMembers are the members of a JSON-RPC message.
var envelopeMembers = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// plainInteger is an id number written as an integer.
var plainInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// refusal is a JSON-RPC error of a whole POST: its id is the refused
// message's when that id could be read, else null.
type refusal struct {
	id  json.RawMessage
	err *jsonrpc.Error
}

func refuse(id json.RawMessage, code int64, format string, args ...any) *refusal {
	return &refusal{id: id, err: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// write answers the POST with the error, as the SDK answers a JSON-RPC
// error it finds before a session runs the message: HTTP 400, JSON.
func (f *refusal) write(w http.ResponseWriter) {
	id := f.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": f.err})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(body)
}

// readMCPBody reads the JSON-RPC messages of an MCP POST (one, or a batch),
// puts the body back for the SDK, and refuses a body that the SDK and this
// server would read differently.
func readMCPBody(r *http.Request) ([]rpcMessage, *refusal) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil, nil // the SDK reads the same error and answers it
	}
	msgs, f := parseMCPBody(body)
	if f == nil {
		f = headersAgree(r.Header, msgs)
	}
	return msgs, f
}

// headersAgree refuses Mcp-Method and Mcp-Name headers that say another
// method or tool than the body. They exist so that a gateway in front can
// route or allow a call without reading the body, and the SDK checks them
// only from protocol 2026-07-28 on (which this stateful server does not
// speak): a gateway allowing "Mcp-Name: listTasks" let through a body that
// called callSiteTool.
func headersAgree(h http.Header, msgs []rpcMessage) *refusal {
	method, name := h.Get("Mcp-Method"), h.Get("Mcp-Name")
	if method == "" && name == "" {
		return nil
	}
	for _, m := range msgs {
		switch {
		case method != "" && m.Method != method:
			return refuse(m.ID, mcp.CodeHeaderMismatch, "The Mcp-Method header says %q but the message's method is %q; send the header that names the message's method, or none.", method, m.Method)
		case name != "" && m.Method == "tools/call" && m.Tool != name:
			return refuse(m.ID, mcp.CodeHeaderMismatch, "The Mcp-Name header says %q but the message calls the tool %q; send the header that names the message's tool, or none.", name, m.Tool)
		}
	}
	return nil
}

// parseMCPBody reads the messages of a body; an empty body is the SDK's to
// answer.
func parseMCPBody(body []byte) ([]rpcMessage, *refusal) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil
	}
	if !json.Valid(body) {
		why := ""
		var syn *json.SyntaxError
		if err := json.Unmarshal(body, new(json.RawMessage)); errors.As(err, &syn) {
			why = fmt.Sprintf(" (at byte %d: %s)", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
		}
		return nil, refuse(nil, jsonrpc.CodeParseError, "The body is not valid JSON%s; send one JSON-RPC message as a JSON object.", why)
	}
	if body[0] != '[' {
		m, f := parseMessage(body, "the message")
		if f != nil {
			return nil, f
		}
		return []rpcMessage{m}, nil
	}
	raws := splitArray(body)
	if len(raws) > maxBatch {
		return nil, refuse(nil, jsonrpc.CodeInvalidRequest, "The batch holds %d messages; this server takes at most %d in one POST. Send them in smaller batches, or one at a time.", len(raws), maxBatch)
	}
	msgs := make([]rpcMessage, 0, len(raws))
	calls := map[string]bool{}
	for i, raw := range raws {
		m, f := parseMessage(raw, fmt.Sprintf("message %d of the batch", i))
		if f != nil {
			return nil, f
		}
		if len(m.ID) > 0 && m.Method != "" {
			if calls[string(m.ID)] {
				return nil, refuse(m.ID, jsonrpc.CodeInvalidRequest, "Message %d of the batch has the id %s of an earlier request in the batch; "+
					"the answers could not be told apart. Give each request its own id.", i, m.ID)
			}
			calls[string(m.ID)] = true
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// parseMessage reads one JSON-RPC message (valid JSON): its members by
// their exact names, each once, a canonical id, and params in which no
// object names a member twice.
func parseMessage(raw []byte, what string) (rpcMessage, *refusal) {
	var m rpcMessage
	members, dup, err := objectOf(raw)
	switch {
	case err != nil:
		return m, refuse(nil, jsonrpc.CodeInvalidRequest, "%s is not a JSON object; each JSON-RPC message is an object with jsonrpc, method, params and id.", upper(what))
	case dup != "":
		return m, refuse(nil, jsonrpc.CodeInvalidRequest, "%s has the member %q more than once, which parsers read differently; send each member once.", upper(what), dup)
	}
	for name := range members {
		for _, known := range envelopeMembers {
			if name != known && strings.EqualFold(name, known) {
				return m, refuse(nil, jsonrpc.CodeInvalidRequest, "%s has a member %q; JSON-RPC member names are case-sensitive: write %q.", upper(what), name, known)
			}
		}
	}
	if v := members["jsonrpc"]; string(bytes.TrimSpace(v)) != `"2.0"` {
		return m, refuse(nil, jsonrpc.CodeInvalidRequest, "%s needs \"jsonrpc\": \"2.0\" (it has %s).", upper(what), orNone(v))
	}
	if id, ok := members["id"]; ok {
		canon, problem := canonicalID(id)
		if problem != "" {
			return m, refuse(nil, jsonrpc.CodeInvalidRequest, "%s has the id %s: %s", upper(what), shortJSON(id), problem)
		}
		m.ID = canon
	}
	if raw, ok := members["method"]; ok {
		if err := json.Unmarshal(raw, &m.Method); err != nil {
			return m, refuse(m.ID, jsonrpc.CodeInvalidRequest, "%s has a method that is not a string; write the method's name, e.g. \"tools/call\".", upper(what))
		}
	}
	params, ok := members["params"]
	if !ok {
		return m, nil
	}
	// A tool's arguments are the tool's to check, and it answers as a tool
	// does (checkToolArguments; callSiteTool reads its own).
	skip := ""
	if m.Method == "tools/call" {
		skip = "arguments"
	}
	if path, key := duplicateMember(params, "params", skip); key != "" {
		return m, refuse(m.ID, jsonrpc.CodeInvalidParams, "%s's %s has the member %q more than once, which parsers read differently; send each member once.", upper(what), path, key)
	}
	p, _, err := objectOf(params)
	if err != nil {
		return m, nil // the SDK refuses params that are not an object
	}
	if m.Method == "tools/call" {
		_ = json.Unmarshal(p["name"], &m.Tool)
	}
	// The ids the client matches later: the call a cancel names, and the
	// progress token its progress notifications carry back.
	if id, ok := p["requestId"]; ok && m.Method == "notifications/cancelled" {
		canon, problem := canonicalID(id)
		if problem != "" {
			return m, refuse(m.ID, jsonrpc.CodeInvalidParams, "%s cancels the request %s: %s", upper(what), shortJSON(id), problem)
		}
		m.Params.RequestID = canon
		_ = json.Unmarshal(p["reason"], &m.Params.Reason)
	}
	if meta, _, err := objectOf(p["_meta"]); err == nil {
		if token, ok := meta["progressToken"]; ok {
			if _, problem := canonicalID(token); problem != "" {
				return m, refuse(m.ID, jsonrpc.CodeInvalidParams, "%s has the progress token %s: %s", upper(what), shortJSON(token),
					strings.ReplaceAll(problem, "the answer", "its progress notifications"))
			}
		}
	}
	return m, nil
}

// canonicalID checks a message's id and spells it as the SDK will answer
// it: a string, or an integer written as one and held exactly by every
// client. problem says what is wrong with any other id, and what to send.
func canonicalID(raw json.RawMessage) (json.RawMessage, string) {
	const send = " Send a string id, or an integer id between -9007199254740991 and 9007199254740991 written without fraction or exponent."
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return nil, "it is empty." + send
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, "it is not a JSON string." + send
		}
		if !utf8.Valid(raw) || loneHalf(raw) {
			return nil, "it holds bytes that are not UTF-8 text, or half of a UTF-16 surrogate pair; the answer would carry another string (U+FFFD in their place), which your client could not match." + send
		}
		canon, _ := json.Marshal(s)
		if len(canon) > maxIDBytes {
			return nil, fmt.Sprintf("it is %d bytes long as JSON; this server takes string ids of at most %d bytes (an id is kept while its request runs and sent back with every answer).", len(canon), maxIDBytes) + send
		}
		return canon, ""
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		if !plainInteger.Match(raw) {
			return nil, "a number with a fraction or an exponent is read as an integer (1.5 as 1), so the answer would carry another id, which your client could not match." + send
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > maxSafeID || n < -maxSafeID {
			return nil, "an integer this large is not held exactly (the answer would carry a nearby number), so your client could not match the answer." + send
		}
		return json.RawMessage(strconv.FormatInt(n, 10)), ""
	case string(raw) == "null":
		return nil, "MCP does not allow a null id (it would be taken for a notification and never answered); leave the id out for a notification." + send
	}
	kind := map[byte]string{'t': "true", 'f': "false", '{': "an object", '[': "an array"}[raw[0]]
	return nil, "an id must be a string or an integer, not " + kind + "." + send
}

// loneHalf reports whether a JSON string holds a \u escape of half a
// UTF-16 surrogate pair without the other half.
func loneHalf(s []byte) bool {
	unit := func(i int) int {
		if i+6 > len(s) || s[i] != '\\' || s[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return int(n)
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		switch u := unit(i); {
		case u < 0:
			i++ // a one-character escape
		case u >= 0xd800 && u < 0xdc00 && unit(i+6) >= 0xdc00 && unit(i+6) < 0xe000:
			i += 11
		case u >= 0xd800 && u < 0xe000:
			return true
		default:
			i += 5
		}
	}
	return false
}

// objectOf reads a JSON object's members (raw is valid JSON) by their
// exact names, and the first name given twice.
func objectOf(raw []byte) (map[string]json.RawMessage, string, error) {
	keys, vals, ok := splitObject(raw)
	if !ok {
		return nil, "", fmt.Errorf("not an object")
	}
	members := make(map[string]json.RawMessage, len(keys))
	dup := ""
	for i, k := range keys {
		if _, ok := members[k]; ok && dup == "" {
			dup = k
		}
		members[k] = vals[i]
	}
	return members, dup, nil
}

// The scanners below split text already checked with json.Valid, so they
// only tell strings and nesting apart: one pass over the bytes, where
// encoding/json's Decoder reads each value twice (a callSiteTool call of
// 1 MiB took 30–60 ms in the prelude that way).

// splitObject is the member names (decoded) and raw values of a JSON object.
func splitObject(b []byte) (keys []string, vals [][]byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, nil, false
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		end := stringEnd(b, i)
		var k string
		if json.Unmarshal(b[i:end], &k) != nil {
			return nil, nil, false
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the colon
		start := i
		i = valueEnd(b, i)
		keys, vals = append(keys, k), append(vals, b[start:i])
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return keys, vals, true
}

// splitArray is the raw items of a JSON array.
func splitArray(b []byte) [][]byte {
	var items [][]byte
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		start := i
		i = valueEnd(b, i)
		items = append(items, b[start:i])
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return items
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the offset just past the string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the offset just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch {
	case i >= len(b):
		return i
	case b[i] == '"':
		return stringEnd(b, i)
	case b[i] == '{' || b[i] == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	return j
}

// duplicateMember finds the first object in raw (valid JSON) that names a
// member twice: its path, written from root, and the name (decoded:
// "\u0061" and "a" are one name). A top-level member named skip is not
// looked into. key is "" when there is none. One pass over the bytes,
// however deep the nesting (TestPreludeReadsDeepParamsInOnePass).
func duplicateMember(raw []byte, root, skip string) (path, key string) {
	type frame struct {
		object    bool
		seen      map[string]bool
		key       string // objects: the member whose value is being read
		expectKey bool
		index     int // arrays: the item being read
	}
	var stack []*frame
	where := func() string {
		var b strings.Builder
		b.WriteString(root)
		for _, f := range stack[:len(stack)-1] {
			if f.object {
				b.WriteString("." + f.key)
			} else {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		return b.String()
	}
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			end := stringEnd(raw, i)
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				f := stack[n-1]
				k := string(raw[i+1 : end-1])
				if bytes.IndexByte(raw[i:end], '\\') >= 0 || !utf8.Valid(raw[i:end]) { // as encoding/json reads it
					_ = json.Unmarshal(raw[i:end], &k)
				}
				if f.seen[k] {
					return where(), k
				}
				f.seen[k], f.key, f.expectKey = true, k, false
				if n == 1 && skip != "" && k == skip { // past the colon, over the value
					v := skipSpace(raw, skipSpace(raw, end)+1)
					end = valueEnd(raw, v)
				}
			}
			i = end - 1
		case '{':
			stack = append(stack, &frame{object: true, seen: map[string]bool{}, expectKey: true})
		case '[':
			stack = append(stack, &frame{})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				if f := stack[n-1]; f.object {
					f.expectKey = true
				} else {
					f.index++
				}
			}
		}
	}
	return "", ""
}

// shortJSON is a JSON value as a message quotes it, cut to a readable length.
func shortJSON(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

// orNone quotes a member's JSON value, or says it is missing.
func orNone(v json.RawMessage) string {
	if v == nil {
		return "none"
	}
	return shortJSON(v)
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// maxBatch is the most messages one POST's batch may hold (batches are the
// SDK's only before protocol 2025-06-18). A batch runs each of its calls at
// once, so the 4 MiB body of pings or createTask calls was 50,000 calls in
// one request; clients that batch send a few.
const maxBatch = 100

// singleHeaders are the headers of an MCP request that name one thing: the
// credential, the session, the protocol version, the stream position.
// Sent twice, the agent guard and the SDK read the first while a proxy in
// front may read the last, or join them with a comma.
var singleHeaders = []string{fiber.HeaderAuthorization, "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id", "Mcp-Method", "Mcp-Name"}

// oneOfEachHeader refuses an MCP or agent API request that sends one of singleHeaders
// more than once, before anything reads it.
func (s *Server) oneOfEachHeader(c *fiber.Ctx) error {
	for _, h := range singleHeaders {
		if n := len(c.Request().Header.PeekAll(h)); n > 1 {
			return errorf(http.StatusBadRequest, codeHeaderRepeated, "The request sends the %s header %d times; parts of the way can read different ones. Send it once.", h, n)
		}
	}
	return c.Next()
}
