package sitetools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what a page may announce, sent to the extension in the welcome (bridge.Limits), which
// checks with them too. A page is untrusted: without limits one tab could fill the
// server's memory or an agent's context window through the catalog.
const (
	// MaxDescriptorBytes bounds one tool descriptor as JSON. 64 KiB holds a long description and a
	// schema with hundreds of properties; anything larger is more than an agent should read to call
	// one tool, and it bounds the work of compiling a schema.
	MaxDescriptorBytes = 64 << 10

	// MaxToolsPerSite bounds how many tools one announcement may carry. Every tool name and
	// description goes into listSiteTools, so a site with more tools costs every agent tokens.
	MaxToolsPerSite = 128

	// MaxAnnouncementBytes bounds a whole announcement. It is below MaxToolsPerSite times
	// MaxDescriptorBytes on purpose: a site may have many tools or a few large ones, not both.
	MaxAnnouncementBytes = 1 << 20

	// MaxTitleBytes bounds a tool's title, which is shown on one line in the popup.
	MaxTitleBytes = 256

	// MaxDescriptionBytes bounds a tool's description, which every agent reads in listSiteTools.
	MaxDescriptionBytes = 8 << 10
)

// defaultInputSchema is what WebMCP means by a tool without an inputSchema: it takes an object.
var defaultInputSchema = json.RawMessage(`{"type":"object"}`)

// toolName is the set of names WebMCP allows for a tool.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Sentinel errors. Every refusal is a *Refusal that unwraps to one of them.
var (
	// ErrBadDescriptor marks one tool descriptor the server will not accept; the rest of the
	// announcement may still be accepted.
	ErrBadDescriptor = errors.New("sitetools: bad tool descriptor")

	// ErrBadAnnouncement marks an announcement the server rejects as a whole, such as one that is
	// not a list or that names a tool twice.
	ErrBadAnnouncement = errors.New("sitetools: bad announcement")

	// ErrUnsupportedSchema marks an input schema that this server cannot check faithfully. It is
	// refused at announce time rather than validated wrongly at call time.
	ErrUnsupportedSchema = errors.New("sitetools: unsupported input schema")
)

// Refusal is why the server would not take a descriptor, an announcement or a schema. Reason is
// one sentence meant to be sent back to the extension and shown to the person who shared the
// site, so it names the tool and what is wrong without internal jargon.
type Refusal struct {
	Kind   error  // ErrBadDescriptor, ErrBadAnnouncement or ErrUnsupportedSchema
	Tool   string // the tool's name, when it is known and valid
	Reason string // a sentence for a person
}

// Error returns the reason, prefixed with the tool when one is known.
func (r *Refusal) Error() string {
	if r.Tool == "" {
		return r.Reason
	}
	return fmt.Sprintf("tool %q: %s", r.Tool, r.Reason)
}

// Unwrap lets errors.Is match the refusal's kind.
func (r *Refusal) Unwrap() error { return r.Kind }

func refuse(kind error, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// Annotations are the hints a page gives about a tool. ReadOnlyHint decides whether a call needs
// the person's approval, so it is taken only when it is a real boolean.
//
// These are the hints Chromium 156 reports (it normalises every tool's annotations to these three,
// plus a debugging flag that says nothing to an agent). ConsequentialHint is, in the WebMCP spec's
// words, for clients that enforce mandatory user confirmation: such a tool always asks. An
// UntrustedContentHint tool's results may hold text the site does not vouch for (other people's
// posts, mail): agents are told so with the result.
type Annotations struct {
	ReadOnlyHint         bool `json:"readOnlyHint"`
	UntrustedContentHint bool `json:"untrustedContentHint"`
	ConsequentialHint    bool `json:"consequentialHint"`
}

// Kinds of tool, as the extension announces them.
const (
	// KindImperative is a tool the page registered with registerTool; it runs through the page's
	// own execute.
	KindImperative = "imperative"
	// KindDeclarative is a <form toolname> that the browser itself turned into a tool; it runs
	// through the browser's executeTool, which fills the form and submits it.
	KindDeclarative = "declarative"
)

// Descriptor is one WebMCP tool as a page registered it and the extension announced it, after
// checking. InputSchema is the page's own schema, compact, exactly as agents will be shown it;
// the translated copy used for validation lives only in the compiled Schema.
type Descriptor struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations Annotations     `json:"annotations"`
	// Kind is KindImperative or KindDeclarative.
	Kind string `json:"kind"`
	// Autosubmit is false for a form the site wants the person to submit themselves (it has no
	// toolautosubmit); such a tool cannot be run remotely. Always true for imperative tools.
	Autosubmit bool `json:"autosubmit"`
	// URL is the address (without fragment) of the page that last offered the tool: where it is
	// reopened when no open tab offers it. The catalog sets it; a page cannot.
	URL string `json:"url,omitempty"`
}

// ReadOnly reports whether a call may run without asking: the page says readOnlyHint, and
// neither says consequentialHint nor is a form (forms carry no annotations, so they are writes).
func (d Descriptor) ReadOnly() bool {
	return d.Annotations.ReadOnlyHint && !d.Annotations.ConsequentialHint && d.Kind != KindDeclarative
}

// NeedsPerson reports a form that only the person may submit (no toolautosubmit).
func (d Descriptor) NeedsPerson() bool { return d.Kind == KindDeclarative && !d.Autosubmit }

// Schema compiles the descriptor's input schema. It is a cache hit for any descriptor that came
// out of CheckDescriptor, whose schema was compiled then.
func (d Descriptor) Schema() (*Schema, error) {
	return CompileSchema(d.InputSchema)
}

// CheckDescriptor checks one descriptor from the extension and compiles its input schema. It
// never trusts the page: every field is type-checked by hand, so a wrong type yields a reason a
// person can act on rather than a decoder message. The error is always a *Refusal.
func CheckDescriptor(raw []byte) (Descriptor, error) {
	if len(raw) > MaxDescriptorBytes {
		return Descriptor{}, refuse(ErrBadDescriptor,
			"the tool descriptor is %d bytes; the limit is %d", len(raw), MaxDescriptorBytes)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Descriptor{}, refuse(ErrBadDescriptor, "the tool descriptor is not a JSON object")
	}
	d, r := decodeDescriptor(fields)
	if r != nil {
		r.Tool = d.Name
		return Descriptor{}, r
	}
	if _, err := CompileSchema(d.InputSchema); err != nil {
		return Descriptor{}, withTool(err, d.Name)
	}
	return d, nil
}

// withTool names the tool on a refusal from schema compilation.
func withTool(err error, name string) error {
	var r *Refusal
	if errors.As(err, &r) {
		copied := *r
		copied.Tool = name
		return &copied
	}
	return &Refusal{Kind: ErrUnsupportedSchema, Tool: name, Reason: err.Error()}
}

func decodeDescriptor(fields map[string]json.RawMessage) (Descriptor, *Refusal) {
	var d Descriptor
	var r *Refusal
	if d.Name, r = decodeName(fields["name"]); r != nil {
		return d, r
	}
	if d.Title, r = decodeText(fields["title"], "title", MaxTitleBytes, false); r != nil {
		return d, r
	}
	if d.Description, r = decodeText(fields["description"], "description", MaxDescriptionBytes, true); r != nil {
		return d, r
	}
	if d.InputSchema, r = decodeInputSchema(fields["inputSchema"]); r != nil {
		return d, r
	}
	if d.Annotations, r = decodeAnnotations(fields["annotations"]); r != nil {
		return d, r
	}
	return decodeKind(d, fields)
}

// decodeKind reads how the tool runs. An announcement without kind comes from an extension older
// than declarative tools: every tool it knew was imperative. A form carries no annotations, so
// whatever the announcement claims for one is dropped.
func decodeKind(d Descriptor, fields map[string]json.RawMessage) (Descriptor, *Refusal) {
	var kind string
	if !absent(fields["kind"]) && json.Unmarshal(fields["kind"], &kind) != nil {
		return d, refuse(ErrBadDescriptor, "the tool's kind is a JSON %s; it must be \"imperative\" or \"declarative\"", jsonKind(fields["kind"]))
	}
	switch kind {
	case "", KindImperative:
		d.Kind, d.Autosubmit = KindImperative, true
		return d, nil
	case KindDeclarative:
		auto, r := decodeHint(fields["autosubmit"], "autosubmit")
		d.Kind, d.Autosubmit, d.Annotations = KindDeclarative, auto, Annotations{}
		return d, r
	}
	return d, refuse(ErrBadDescriptor, "the tool's kind %q is neither \"imperative\" nor \"declarative\"", clip(kind, 32))
}

func decodeName(raw json.RawMessage) (string, *Refusal) {
	var name string
	if absent(raw) || json.Unmarshal(raw, &name) != nil {
		return "", refuse(ErrBadDescriptor, "the tool has no name, or its name is not a string")
	}
	if !toolName.MatchString(name) {
		return "", refuse(ErrBadDescriptor,
			"the tool name %q is not allowed; use 1 to 128 letters, digits, '_', '.' or '-'", clip(name, 64))
	}
	return name, nil
}

// decodeText reads a title or description. Titles are shown on one line, so they may hold no
// control characters; descriptions may hold line breaks and tabs.
func decodeText(raw json.RawMessage, field string, limit int, required bool) (string, *Refusal) {
	if absent(raw) {
		if required {
			return "", refuse(ErrBadDescriptor, "the tool has no %s", field)
		}
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", refuse(ErrBadDescriptor, "the tool's %s is not a string", field)
	}
	if len(s) > limit {
		return "", refuse(ErrBadDescriptor, "the tool's %s is %d bytes; the limit is %d", field, len(s), limit)
	}
	if hasControl(s, field == "description") {
		return "", refuse(ErrBadDescriptor, "the tool's %s contains control characters", field)
	}
	return s, nil
}

func hasControl(s string, allowLines bool) bool {
	return strings.ContainsFunc(s, func(c rune) bool {
		if allowLines && (c == '\n' || c == '\t' || c == '\r') {
			return false
		}
		return unicode.IsControl(c)
	})
}

// decodeInputSchema returns the schema compacted, or the WebMCP default when there is none.
func decodeInputSchema(raw json.RawMessage) (json.RawMessage, *Refusal) {
	if absent(raw) {
		return defaultInputSchema, nil
	}
	if raw[0] != '{' {
		return nil, refuse(ErrBadDescriptor,
			"the tool's inputSchema is a JSON %s; it must be a JSON Schema object", jsonKind(raw))
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, refuse(ErrBadDescriptor, "the tool's inputSchema is not valid JSON")
	}
	return out.Bytes(), nil
}

func decodeAnnotations(raw json.RawMessage) (Annotations, *Refusal) {
	var a Annotations
	if absent(raw) {
		return a, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return a, refuse(ErrBadDescriptor, "the tool's annotations are not a JSON object")
	}
	var r *Refusal
	if a.ReadOnlyHint, r = decodeHint(fields["readOnlyHint"], "readOnlyHint"); r != nil {
		return a, r
	}
	if a.UntrustedContentHint, r = decodeHint(fields["untrustedContentHint"], "untrustedContentHint"); r != nil {
		return a, r
	}
	a.ConsequentialHint, r = decodeHint(fields["consequentialHint"], "consequentialHint")
	return a, r
}

// decodeHint accepts only true, false or nothing: a hint of "false" as a string must not be read
// as anything, since readOnlyHint lets a tool run without asking.
func decodeHint(raw json.RawMessage, name string) (bool, *Refusal) {
	if absent(raw) {
		return false, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, refuse(ErrBadDescriptor, "the tool's %s is a JSON %s; it must be true or false", name, jsonKind(raw))
	}
	return b, nil
}

// absent reports a field that is missing or null: JavaScript's undefined does not survive JSON
// and some pages send null for an optional field.
func absent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// jsonKind names the JSON type of a value for a reason sentence.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// clip shortens s to at most n runes for quoting in a message.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// ParseDescriptors checks one announcement: the JSON list of every tool a page currently offers.
// Tools that fail their own checks are left out and reported in refused, so one broken tool does
// not take the whole site offline. The announcement as a whole is refused (err) when it is not a
// list, too large, has too many tools, or names a tool twice: WebMCP lets a later registration
// replace an earlier one, so the page's own list can never hold a name twice and a list that does
// was not produced by a working extension.
func ParseDescriptors(raw []byte) (tools []Descriptor, refused []*Refusal, err error) {
	items, r := splitAnnouncement(raw)
	if r != nil {
		return nil, nil, r
	}
	if r := checkUniqueNames(items); r != nil {
		return nil, nil, r
	}
	for _, item := range items {
		d, err := CheckDescriptor(item)
		if err != nil {
			refused = append(refused, asRefusal(err))
			continue
		}
		tools = append(tools, d)
	}
	return tools, refused, nil
}

func splitAnnouncement(raw []byte) ([]json.RawMessage, *Refusal) {
	if len(raw) > MaxAnnouncementBytes {
		return nil, refuse(ErrBadAnnouncement,
			"the list of tools is %d bytes; the limit is %d", len(raw), MaxAnnouncementBytes)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, refuse(ErrBadAnnouncement, "the list of tools is not a JSON array")
	}
	if len(items) > MaxToolsPerSite {
		return nil, refuse(ErrBadAnnouncement,
			"the site offers %d tools; the limit is %d", len(items), MaxToolsPerSite)
	}
	return items, nil
}

// checkUniqueNames looks only at names that decode as strings; other problems are left to each
// descriptor's own check.
func checkUniqueNames(items []json.RawMessage) *Refusal {
	seen := make(map[string]bool, len(items))
	for _, item := range items {
		var probe struct {
			Name any `json:"name"`
		}
		if json.Unmarshal(item, &probe) != nil {
			continue
		}
		name, ok := probe.Name.(string)
		if !ok {
			continue
		}
		if seen[name] {
			return refuse(ErrBadAnnouncement, "the list of tools names %q twice", clip(name, 64))
		}
		seen[name] = true
	}
	return nil
}

func asRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return &Refusal{Kind: ErrBadDescriptor, Reason: err.Error()}
}
