package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tabbridge/tabbridge/sitetools"
)

// ProtocolVersion is the version of the extension socket protocol this server
// speaks (docs/PROTOCOL.md).
const ProtocolVersion = 1

// Message types on the extension socket. Inbound: hello, ping, sites.open.
// Outbound: welcome, pong, sites, browser, error.
const (
	TypeHello     = "hello"
	TypePing      = "ping"
	TypeSitesOpen = "sites.open"
	TypeWelcome   = "welcome"
	TypePong      = "pong"
	TypeSites     = "sites"
	TypeBrowser   = "browser"
	TypeError     = "error"
)

// Close codes the server ends an extension socket with (docs/PROTOCOL.md).
const (
	CloseNormal              = 1000
	CloseGoingAway           = 1001 // the server is shutting down
	CloseUnsupportedData     = 1003 // a binary frame
	ClosePolicy              = 1008 // a slow consumer
	CloseTooBig              = 1009 // a frame over MaxMessage
	CloseInternal            = 1011
	CloseUnsupportedProtocol = 4000 // no protocol version in common
	CloseReplaced            = 4001 // the same browser connected again
	CloseHelloExpected       = 4002 // the first message was not a valid hello
	CloseIdle                = 4003 // silent for longer than the idle timeout
	CloseSignedOut           = 4004 // the sign-in whose ticket opened the socket ended
)

// Protocol error codes sent in error messages.
const (
	ErrCodeInvalidJSON    = "invalid_json"
	ErrCodeInvalidMessage = "invalid_message"
	ErrCodeUnknownType    = "unknown_type"
	ErrCodeInvalidField   = "invalid_field"
	ErrCodeHelloExpected  = "hello_expected"
	ErrCodeHelloRepeated  = "hello_repeated"
	ErrCodeUnsupported    = "unsupported_protocol"
	ErrCodeSiteNotShared  = "site_not_shared"
	ErrCodeLimitReached   = "limit_reached"
)

// Limits on what a browser may send.
const (
	maxIDLen        = 64
	maxNameRunes    = 100
	maxVersionLen   = 32
	maxOpenSites    = 1000
	maxTabsPerSite  = 10000
	maxLastUsedSkew = 5 * time.Minute
)

var (
	browserIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)
	versionPattern   = regexp.MustCompile(`^[0-9A-Za-z.+-]{1,32}$`)
)

// ProtocolError is a message the server refuses: it is answered with an
// error message naming Code, Message and the offending message's id (Ref).
type ProtocolError struct {
	Code    string
	Message string
	Ref     string
}

func (e *ProtocolError) Error() string { return e.Code + ": " + e.Message }

func protoErr(code, ref, format string, args ...any) *ProtocolError {
	return &ProtocolError{Code: code, Ref: ref, Message: fmt.Sprintf(format, args...)}
}

// Inbound is one decoded message from a browser. Type says which of the
// payload fields is set.
type Inbound struct {
	Type       string
	ID         string
	Hello      *Hello
	SitesOpen  *SitesOpen
	Announce   *Announce
	Document   *DocumentRef
	Dispatched *CallDispatched
	Result     *CallResult
}

// Hello is the browser's introduction, the first message on every socket.
type Hello struct {
	// Protocol is the highest protocol version the extension speaks;
	// MinProtocol the lowest (Protocol when absent).
	Protocol    int    `json:"protocol"`
	MinProtocol int    `json:"minProtocol"`
	BrowserID   string `json:"browserId"`
	Name        string `json:"name"`
	Version     string `json:"version"`
}

// SitesOpen is the full list of shared sites a browser has open now.
type SitesOpen struct {
	Sites []OpenSiteIn `json:"sites"`
}

// OpenSiteIn is one entry of sites.open as the browser sends it.
type OpenSiteIn struct {
	Origin   string `json:"origin"`
	LastUsed int64  `json:"lastUsed"` // milliseconds since the Unix epoch
	Tabs     int    `json:"tabs"`
}

type envelope struct {
	Type *string         `json:"type"`
	ID   json.RawMessage `json:"id"`
}

// Decode parses one text frame from a browser. Fields the protocol does not
// define are ignored (so a newer extension can add some), but a frame that is
// not one JSON object, has no or an unknown type, or has a missing or invalid
// field gives a *ProtocolError.
func Decode(frame []byte) (*Inbound, error) {
	if !utf8.Valid(frame) {
		return nil, protoErr(ErrCodeInvalidJSON, "", "The frame is not valid UTF-8 text.")
	}
	trimmed := bytes.TrimSpace(frame)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, protoErr(ErrCodeInvalidMessage, "", "Each frame must be one JSON object with a \"type\".")
	}
	var env envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		return nil, protoErr(ErrCodeInvalidJSON, "", "The frame is not valid JSON: %s.", jsonReason(err))
	}
	id, err := decodeID(env.ID)
	if err != nil {
		return nil, err
	}
	if env.Type == nil || *env.Type == "" {
		return nil, protoErr(ErrCodeInvalidMessage, id, "The message has no \"type\".")
	}
	in := &Inbound{Type: *env.Type, ID: id}
	switch in.Type {
	case TypeHello:
		in.Hello, err = decodeHello(frame, id)
	case TypePing:
	case TypeSitesOpen:
		in.SitesOpen, err = decodeSitesOpen(frame, id)
	case TypeToolsAnnounce:
		in.Announce, err = decodeAnnounce(frame, id)
	case TypeDocumentUsed, TypeDocumentGone:
		in.Document, err = decodeDocumentRef(frame, id, in.Type)
	case TypeCallDispatched:
		in.Dispatched, err = decodeDispatched(frame, id)
	case TypeCallResult:
		in.Result, err = decodeCallResult(frame, id)
	default:
		return nil, protoErr(ErrCodeUnknownType, id, "Unknown message type %q; this server speaks protocol %d (docs/PROTOCOL.md).", clip(in.Type), ProtocolVersion)
	}
	if err != nil {
		return nil, err
	}
	return in, nil
}

func decodeID(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return "", protoErr(ErrCodeInvalidField, "", "Field \"id\" must be a string.")
	}
	if len(id) > maxIDLen || strings.IndexFunc(id, unicode.IsControl) >= 0 {
		return "", protoErr(ErrCodeInvalidField, "", "Field \"id\" must be at most %d characters, with no control characters.", maxIDLen)
	}
	return id, nil
}

func decodeHello(frame []byte, id string) (*Hello, error) {
	var h Hello
	if err := json.Unmarshal(frame, &h); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "hello: %s.", jsonReason(err))
	}
	if h.MinProtocol == 0 {
		h.MinProtocol = h.Protocol
	}
	switch {
	case h.Protocol <= 0 || h.MinProtocol <= 0 || h.MinProtocol > h.Protocol:
		return nil, protoErr(ErrCodeInvalidField, id, "hello: \"protocol\" must be a positive integer (and \"minProtocol\", if sent, at most \"protocol\").")
	case !browserIDPattern.MatchString(h.BrowserID):
		return nil, protoErr(ErrCodeInvalidField, id, "hello: \"browserId\" must be 8 to 64 characters of A-Z, a-z, 0-9, '_' and '-' (a UUID fits).")
	case !versionPattern.MatchString(h.Version):
		return nil, protoErr(ErrCodeInvalidField, id, "hello: \"version\" must be 1 to %d characters of 0-9, A-Z, a-z, '.', '+' and '-'.", maxVersionLen)
	}
	name, err := CleanBrowserName(h.Name)
	if err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "hello: %s", err)
	}
	h.Name = name
	return &h, nil
}

// CleanBrowserName checks a browser's name: trimmed, 1 to 100 characters, no
// control characters.
func CleanBrowserName(name string) (string, error) {
	name = strings.TrimSpace(name)
	n := utf8.RuneCountInString(name)
	switch {
	case n == 0:
		return "", errors.New("\"name\" is required and must not be blank.")
	case n > maxNameRunes:
		return "", fmt.Errorf("\"name\" is %d characters; at most %d are allowed.", n, maxNameRunes)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", errors.New("\"name\" must not contain control characters.")
	}
	return name, nil
}

func decodeSitesOpen(frame []byte, id string) (*SitesOpen, error) {
	var s SitesOpen
	if err := json.Unmarshal(frame, &s); err != nil {
		return nil, protoErr(ErrCodeInvalidField, id, "sites.open: %s.", jsonReason(err))
	}
	if s.Sites == nil {
		return nil, protoErr(ErrCodeInvalidField, id, "sites.open: \"sites\" is required (an empty array when no shared site is open).")
	}
	if len(s.Sites) > maxOpenSites {
		return nil, protoErr(ErrCodeInvalidField, id, "sites.open: %d sites; at most %d.", len(s.Sites), maxOpenSites)
	}
	for i, site := range s.Sites {
		origin, err := sitetools.NormalizeOrigin(site.Origin)
		if err != nil {
			return nil, protoErr(ErrCodeInvalidField, id, "sites.open: sites[%d].origin: %s", i, strings.TrimPrefix(err.Error(), sitetools.ErrOrigin.Error()+": "))
		}
		if site.LastUsed < 0 || site.Tabs < 0 || site.Tabs > maxTabsPerSite {
			return nil, protoErr(ErrCodeInvalidField, id, "sites.open: sites[%d]: \"lastUsed\" must be milliseconds since 1970 and \"tabs\" 0 to %d.", i, maxTabsPerSite)
		}
		s.Sites[i].Origin = origin
	}
	return &s, nil
}

// jsonReason shortens a decoding error to what the sender must fix.
func jsonReason(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return fmt.Sprintf("field %q must not be %s", typ.Field, typ.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// clip bounds untrusted text echoed back in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}

// Outbound messages.

// Site is a shared site as the extension sees it.
type Site struct {
	ID            string `json:"id"`
	Origin        string `json:"origin"`
	WorkspaceID   string `json:"workspaceId"`
	WorkspaceName string `json:"workspaceName"`
}

// Limits tells the extension the server's limits in the welcome, so the
// extension enforces the server's numbers rather than copies of them: each is
// the one Go value the server itself checks against (docs/PROTOCOL.md).
type Limits struct {
	MaxMessageBytes int64 `json:"maxMessageBytes"` // Options.MaxMessage
	PingSeconds     int   `json:"pingSeconds"`     // Options.PingInterval
	IdleSeconds     int   `json:"idleSeconds"`     // Options.Idle
	// CallTimeoutMs is the longest a call runs in the browser
	// (Options.CallTimeout), in milliseconds: tests run calls of 1.5 s.
	CallTimeoutMs        int64 `json:"callTimeoutMs"`
	MaxResultBytes       int   `json:"maxResultBytes"`       // sitetools.MaxResultBytes
	MaxToolsPerSite      int   `json:"maxToolsPerSite"`      // sitetools.MaxToolsPerSite
	MaxDescriptorBytes   int   `json:"maxDescriptorBytes"`   // sitetools.MaxDescriptorBytes
	MaxAnnouncementBytes int   `json:"maxAnnouncementBytes"` // sitetools.MaxAnnouncementBytes
	MaxTitleBytes        int   `json:"maxTitleBytes"`        // sitetools.MaxTitleBytes
	MaxDescriptionBytes  int   `json:"maxDescriptionBytes"`  // sitetools.MaxDescriptionBytes
}

type welcomeMsg struct {
	Type        string `json:"type"`
	ID          string `json:"id,omitempty"`
	Protocol    int    `json:"protocol"`
	BrowserID   string `json:"browserId"`
	Name        string `json:"name"`
	SharedSites []Site `json:"sharedSites"`
	Limits      Limits `json:"limits"`
}

type pongMsg struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	Time int64  `json:"time"`
}

type sitesMsg struct {
	Type        string `json:"type"`
	SharedSites []Site `json:"sharedSites"`
}

type browserMsg struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type errorMsg struct {
	Type     string `json:"type"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Ref      string `json:"ref,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
}

// encode marshals an outbound message. Every frame the server sends a browser is a text frame,
// and Chromium fails the whole socket (1006) on one that is not UTF-8, dropping every call in
// flight; so encode holds that invariant for every message. encoding/json already writes U+FFFD
// for bad bytes in a Go string, but copies a json.RawMessage (a call's arguments, an approval's
// request) as it is: any bad bytes left are inside its strings (Marshal checked the JSON), and
// are replaced there. A call's arguments never get that far (see encodeCall).
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("bridge: encode %T: %v", v, err)) // only our own types are encoded
	}
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return b
}

// ErrArgumentsNotText refuses a call whose arguments are not UTF-8 text. sitetools refuses such
// arguments before validation, with where; this is the encoder's own guard, so the page never gets
// arguments other than the ones the server checked.
var ErrArgumentsNotText = errors.New("bridge: call arguments are not UTF-8 text")

// encodeCall encodes a call for the browser, refusing rather than repairing arguments that are not
// UTF-8, since repaired ones are not what the agent sent or the server validated.
func encodeCall(m callMsg) ([]byte, error) {
	if !utf8.Valid(m.Arguments) {
		return nil, ErrArgumentsNotText
	}
	if !json.Valid(m.Arguments) {
		return nil, fmt.Errorf("encode call: arguments are not JSON")
	}
	return encode(m), nil
}
