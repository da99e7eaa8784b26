package bridge

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tabbridge/tabbridge/sitetools"
)

// Message types of the tool-call path (docs/PROTOCOL.md, "Tools and calls").
const (
	TypeToolsAnnounce  = "tools.announce"  // extension: what one document registered
	TypeToolsAccepted  = "tools.accepted"  // server: which tools it took, which it refused and why
	TypeDocumentUsed   = "document.used"   // extension: a document's tab was used
	TypeDocumentGone   = "document.gone"   // extension: a document unloaded or its tab closed
	TypeCall           = "call"            // server: run a tool
	TypeCallDispatched = "call.dispatched" // extension: which document runs it
	TypeCallResult     = "call.result"     // extension: the page's result or a failure
	TypeCallCancel     = "call.cancel"     // server: stop a call
	TypeApprovals      = "approvals"       // server: the person's pending approvals changed
)

// Error codes of the tool-call path.
const (
	ErrCodeUnknownCall = "unknown_call"
)

// Limits on the tool-call messages.
const (
	maxTitleLen = 512
	maxURLLen   = 8 << 10
)

var documentIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Announce is tools.announce: the tools one document registered.
type Announce struct {
	DocumentID string          `json:"documentId"`
	Origin     string          `json:"origin"`
	URL        string          `json:"url"`
	Title      string          `json:"title"`
	TabID      int             `json:"tabId"`
	LastUsed   int64           `json:"lastUsed"`
	Tools      json.RawMessage `json:"tools"`
}

// DocumentRef is document.used and document.gone.
type DocumentRef struct {
	DocumentID string `json:"documentId"`
	LastUsed   int64  `json:"lastUsed"`
}

// CallDispatched is call.dispatched: the extension chose a document.
type CallDispatched struct {
	CallID     string `json:"callId"`
	DocumentID string `json:"documentId"`
}

// CallResult is call.result.
type CallResult struct {
	CallID string          `json:"callId"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *CallError      `json:"error"`
}

// CallError is a failed call as the extension reports it.
type CallError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Size    int    `json:"size"`
}

func decodeAnnounce(frame []byte, id string) (*Announce, error) {
	var a Announce
	if err := json.Unmarshal(frame, &a); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: %s.", jsonReason(err))
	}
	if !documentIDPattern.MatchString(a.DocumentID) {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: \"documentId\" must be 1 to 128 characters of A-Z, a-z, 0-9, '_' and '-'.")
	}
	origin, err := sitetools.NormalizeOrigin(a.Origin)
	if err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: origin: %s", strings.TrimPrefix(err.Error(), sitetools.ErrOrigin.Error()+": "))
	}
	a.Origin = origin
	if err := checkPageURL(a.URL, origin); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: %s", err.Error())
	}
	if !utf8.ValidString(a.Title) || len(a.Title) > maxTitleLen {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: \"title\" must be valid text of at most %d bytes.", maxTitleLen)
	}
	if a.LastUsed < 0 || a.TabID < -1 {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: \"lastUsed\" must be milliseconds since 1970 and \"tabId\" a tab id.")
	}
	if len(a.Tools) == 0 || string(a.Tools) == "null" {
		return nil, protoErr(ErrCodeInvalidField, id, "tools.announce: \"tools\" is required (an empty array when the page registers none).")
	}
	return &a, nil
}

// checkPageURL accepts an http(s) address on the announced origin.
func checkPageURL(raw, origin string) error {
	if len(raw) > maxURLLen {
		return fmt.Errorf("\"url\" is longer than %d bytes", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("\"url\" must be the page's http or https address")
	}
	o, err := sitetools.NormalizeOrigin(u.Scheme + "://" + u.Host)
	if err != nil || o != origin {
		return fmt.Errorf("\"url\" must be on the announced origin %s", origin)
	}
	return nil
}

func decodeDocumentRef(frame []byte, id, typ string) (*DocumentRef, error) {
	var d DocumentRef
	if err := json.Unmarshal(frame, &d); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "%s: %s.", typ, jsonReason(err))
	}
	if !documentIDPattern.MatchString(d.DocumentID) {
		return nil, protoErr(ErrCodeInvalidField, id, "%s: \"documentId\" must be 1 to 128 characters of A-Z, a-z, 0-9, '_' and '-'.", typ)
	}
	if d.LastUsed < 0 {
		return nil, protoErr(ErrCodeInvalidField, id, "%s: \"lastUsed\" must be milliseconds since 1970.", typ)
	}
	return &d, nil
}

func decodeDispatched(frame []byte, id string) (*CallDispatched, error) {
	var d CallDispatched
	if err := json.Unmarshal(frame, &d); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "call.dispatched: %s.", jsonReason(err))
	}
	if d.CallID == "" || len(d.CallID) > maxIDLen || !documentIDPattern.MatchString(d.DocumentID) {
		return nil, protoErr(ErrCodeInvalidField, id, "call.dispatched: \"callId\" and \"documentId\" are required.")
	}
	return &d, nil
}

func decodeCallResult(frame []byte, id string) (*CallResult, error) {
	var r CallResult
	if err := json.Unmarshal(frame, &r); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "call.result: %s.", jsonReason(err))
	}
	if r.CallID == "" || len(r.CallID) > maxIDLen {
		return nil, protoErr(ErrCodeInvalidField, id, "call.result: \"callId\" is required.")
	}
	if !r.OK && (r.Error == nil || r.Error.Code == "") {
		return nil, protoErr(ErrCodeInvalidField, id, "call.result: a failed call needs \"error\": {\"code\", \"message\"}.")
	}
	if !r.OK && (len(r.Error.Message) > 4096 || !utf8.ValidString(r.Error.Message)) {
		return nil, protoErr(ErrCodeInvalidField, id, "call.result: \"error.message\" must be valid text of at most 4096 bytes.")
	}
	if r.OK && len(r.Result) == 0 {
		r.Result = json.RawMessage("null")
	}
	return &r, nil
}

// toolsAccepted answers a tools.announce.
type toolsAccepted struct {
	Type       string       `json:"type"`
	Ref        string       `json:"ref,omitempty"`
	DocumentID string       `json:"documentId"`
	Accepted   []string     `json:"accepted"`
	Refused    []refusedOut `json:"refused"`
}

type refusedOut struct {
	Tool   string `json:"tool,omitempty"`
	Reason string `json:"reason"`
}

type callMsg struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Site       string          `json:"site"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	DocumentID string          `json:"documentId,omitempty"`
	URL        string          `json:"url,omitempty"`
	Deadline   int64           `json:"deadline"`
	Gate       string          `json:"gate,omitempty"`
}

type cancelMsg struct {
	Type   string `json:"type"`
	CallID string `json:"callId"`
	Reason string `json:"reason"`
}

// ApprovalsMsg tells a browser how many approvals wait for its person, and
// what just changed, for the badge and a notification. It is coalesced on
// the socket (see mergeApprovals): a browser may see only the latest of a burst.
type ApprovalsMsg struct {
	Type    string `json:"type"`
	Pending int    `json:"pending"`
	Event   string `json:"event,omitempty"`
	// Request is the request that changed.
	Request *ApprovalRef `json:"request,omitempty"`
}

// EventApprovalCreated is the approvals event of a new request: the one the
// extension alerts the person for.
const EventApprovalCreated = "approval.created"

// ApprovalRef names the request an approvals message is about.
type ApprovalRef struct {
	ID     string `json:"id"`
	Tool   string `json:"tool"`
	Site   string `json:"site"`
	TaskID string `json:"taskId"`
}

// announceDocument builds the catalog's Document from an announcement.
func (c *conn) announceDocument(a *Announce, tools []sitetools.Descriptor, refused []*sitetools.Refusal) sitetools.Document {
	used := time.UnixMilli(a.LastUsed)
	if a.LastUsed == 0 || used.After(time.Now().Add(maxLastUsedSkew)) {
		used = time.Now()
	}
	return sitetools.Document{BrowserID: c.browserID, DocumentID: a.DocumentID, Origin: a.Origin, URL: a.URL,
		Title: a.Title, TabID: a.TabID, LastUsed: used, Tools: tools, Refused: refused, Bytes: len(a.Tools)}
}
