package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/tabbridge/tabbridge/approvals"
	"github.com/tabbridge/tabbridge/sitetools"
	"github.com/tabbridge/tabbridge/store"
)

// requestCard is a request as the person reads it: the tool's own title and
// description, the arguments as labelled fields from the tool's schema, who
// asked, and (once answered) what the answer did.
type requestCard struct {
	approvals.Request
	Title, Description string
	// Agent names who asked: the token's name or the connected app's.
	Agent  string
	Fields []argField
	// Runs are the calls that waited on an answered request, oldest first.
	Runs []*store.AuditEntry
}

// argField is one argument: its schema's title (else its name), the
// schema's description, and the value (a string as is, anything else as
// compact JSON).
type argField struct {
	Name, Title, Description, Value string
	// Undeclared is a name the tool's schema does not list while it lists
	// others: one that may only look like a parameter ("іtem", Cyrillic і,
	// beside "item"), so the card says the tool does not declare it.
	Undeclared bool
}

// schemaProps is the part of a tool's input schema a card reads.
type schemaProps struct {
	Properties        map[string]propText `json:"properties"`
	PatternProperties map[string]propText `json:"patternProperties"`
}

// propText is what a card shows of a property's schema.
type propText struct {
	Title       string `json:"title"`
	Description string `json:"description"`
}

// namePatterns is a schema's patternProperties, compiled as the validator
// compiles them (Go's regexp, unanchored), in the patterns' order; a pattern
// that does not compile matches nothing.
type namePatterns []namePattern

type namePattern struct {
	re   *regexp.Regexp
	text propText
}

func (p schemaProps) patterns() namePatterns {
	keys := make([]string, 0, len(p.PatternProperties))
	for pat := range p.PatternProperties {
		keys = append(keys, pat)
	}
	sort.Strings(keys)
	var out namePatterns
	for _, pat := range keys {
		if re, err := regexp.Compile(pat); err == nil {
			out = append(out, namePattern{re, p.PatternProperties[pat]})
		}
	}
	return out
}

// match is the schema of the first pattern name matches; ok false when none does.
func (ps namePatterns) match(name string) (propText, bool) {
	for _, p := range ps {
		if p.re.MatchString(name) {
			return p.text, true
		}
	}
	return propText{}, false
}

// cards builds the cards for reqs. Each shows its tool as the site described
// it when the call asked (the page may have changed or dropped it since);
// only rows from before that was kept read the site's current tools, each
// site's once.
func (s *Server) cards(ctx context.Context, uid string, reqs []approvals.Request) []requestCard {
	tools := map[string]map[string]sitetools.Descriptor{}
	agents := map[string]string{}
	out := make([]requestCard, len(reqs))
	for i, r := range reqs {
		d := sitetools.Descriptor{Title: r.ToolTitle, Description: r.ToolDescription, InputSchema: json.RawMessage(r.ToolInputSchema)}
		if r.ToolInputSchema == "" {
			byName, ok := tools[r.Site]
			if !ok {
				byName = map[string]sitetools.Descriptor{}
				if site, err := s.catalog.Site(ctx, uid, r.Site); err == nil {
					for _, d := range site.Tools {
						byName[d.Name] = d
					}
				}
				tools[r.Site] = byName
			}
			d = byName[r.Tool]
		}
		if _, ok := agents[r.TokenID]; !ok {
			agents[r.TokenID] = s.agentName(ctx, r.WorkspaceID, r.TokenID)
		}
		out[i] = requestCard{Request: r, Title: d.Title, Description: d.Description, Agent: agents[r.TokenID],
			Fields: argFields(r.Arguments, d.InputSchema)}
	}
	return out
}

// agentName is the name of the token or connected app id stands for in the
// workspace, "" when unknown.
func (s *Server) agentName(ctx context.Context, workspaceID, id string) string {
	if id == "" {
		return ""
	}
	var name string
	db := s.opts.DB.WithContext(ctx)
	if db.Table("agent_tokens").Select("name").Where("id = ? AND workspace_id = ?", id, workspaceID).Scan(&name); name != "" {
		return "token “" + shown(name) + "”"
	}
	if db.Table("oauth_grants").Select("client_name").Where("id = ? AND workspace_id = ?", id, workspaceID).Scan(&name); name != "" {
		return shown(name) // the connected app's own claim, perhaps registered before names were checked
	}
	return ""
}

// argFields lays out a request's arguments (a JSON object) with the
// schema's titles and descriptions where it has them. The tool's own
// parameters come first, in the order its schema lists them, then any
// others by name: the list scrolls (about four rows in the popup), and an
// agent that adds properties named to sort first ("aaa1", "aaa2", …) would
// otherwise push the ones the page acts on out of sight.
func argFields(args string, schema json.RawMessage) []argField {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil {
		return nil
	}
	var props schemaProps
	_ = json.Unmarshal(schema, &props)
	out := make([]argField, 0, len(obj))
	for _, k := range propertyOrder(schema) {
		if raw, ok := obj[k]; ok {
			p := props.Properties[k]
			out = append(out, argField{Name: k, Title: cmp.Or(p.Title, k), Description: p.Description, Value: fieldValue(raw)})
			delete(obj, k)
		}
	}
	rest := make([]string, 0, len(obj))
	for k := range obj {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	patterns := props.patterns()
	for _, k := range rest {
		// A name one of the schema's patterns matches is the tool's own, as
		// a listed one is: marking it would teach people to read past the mark.
		if p, ok := patterns.match(k); ok {
			out = append(out, argField{Name: k, Title: cmp.Or(p.Title, k), Description: p.Description, Value: fieldValue(obj[k])})
			continue
		}
		out = append(out, argField{Name: k, Title: k, Value: fieldValue(obj[k]), Undeclared: len(props.Properties)+len(props.PatternProperties) > 0})
	}
	return out
}

// propertyOrder is the names of a schema's top-level properties in the
// order it lists them.
func propertyOrder(schema json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(schema))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "properties" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		return objectKeys(dec)
	}
	return nil
}

// objectKeys reads the object next in dec and returns its keys in order.
func objectKeys(dec *json.Decoder) []string {
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		key, err := dec.Token()
		name, ok := key.(string)
		if err != nil || !ok {
			return keys
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
		if !seen[name] {
			seen[name] = true
			keys = append(keys, name)
		}
	}
	return keys
}

func fieldValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// recentAnswered are the requests the person answered (or that ended) in
// the last answeredFor, newest first, so the inbox says what each answer
// did: "Allowed once — createNote returned n4".
func (s *Server) recentAnswered(ctx context.Context, uid string) ([]requestCard, error) {
	var reqs []approvals.Request
	err := s.opts.DB.WithContext(ctx).Where("user_id = ? AND status <> ? AND decided_by <> '' AND decided_at > ?",
		uid, approvals.StatusPending, store.Now().Add(-answeredFor)).Order("decided_at DESC").Limit(answeredShown).Find(&reqs).Error
	if err != nil {
		return nil, fmt.Errorf("answered requests: %w", err)
	}
	cards := s.cards(ctx, uid, reqs)
	if len(reqs) == 0 {
		return cards, nil
	}
	ids := make([]string, len(reqs))
	since := reqs[0].CreatedAt
	for i, r := range reqs {
		ids[i] = r.ID
		if r.CreatedAt.Before(since) {
			since = r.CreatedAt
		}
	}
	runs, err := s.opts.DB.AuditOfRequests(ctx, uid, ids, since)
	if err != nil {
		return nil, fmt.Errorf("answered runs: %w", err)
	}
	for i := range cards {
		for j := range runs {
			if runs[j].RequestID == cards[i].ID {
				cards[i].Runs = append(cards[i].Runs, &runs[j])
			}
		}
	}
	return cards, nil
}

// answeredFor and answeredShown bound the inbox's "Just answered" list.
const (
	answeredFor   = 15 * time.Minute
	answeredShown = 5
)

// ArgumentsNote says, for a card with more arguments than the popup's box
// shows at once, how many there are and how many the tool does not declare,
// so the person knows to scroll; "" for a few.
func (c requestCard) ArgumentsNote() string {
	if len(c.Fields) <= shownArguments {
		return ""
	}
	undeclared := 0
	for _, f := range c.Fields {
		if f.Undeclared {
			undeclared++
		}
	}
	note := fmt.Sprintf("%d arguments", len(c.Fields))
	if undeclared > 0 {
		note += fmt.Sprintf(", %d of them not declared by %s", undeclared, c.Tool)
	}
	return note + ": scroll the list to read them all."
}

// shownArguments is about how many argument rows the popup's box shows.
const shownArguments = 4

// Outcome says in one line what an answered request did.
func (c requestCard) Outcome() string {
	head := requestLabel(c.Request)
	if c.Status != approvals.StatusAllowed {
		if c.Status == approvals.StatusDenied && c.Remembered() {
			return head + " — the agent was told no; if it repeats this call in its task, it is told no again without asking you"
		}
		if c.Status == approvals.StatusDenied {
			return head + " — the agent was told no"
		}
		return head
	}
	if len(c.Runs) == 0 {
		return head + " — running…"
	}
	var parts []string
	for _, r := range c.Runs {
		switch {
		case r.Outcome == sitetools.OutcomeOK && r.Result != "":
			parts = append(parts, c.Tool+" returned "+shown(shorten(r.Result, 140)))
		case r.Outcome == sitetools.OutcomeOK:
			parts = append(parts, c.Tool+" ran")
		case r.Outcome == sitetools.OutcomeRunning:
			parts = append(parts, "running…")
		case r.Error != "":
			parts = append(parts, outcomeLabel(r.Outcome)+": "+shown(shorten(r.Error, 200)))
		default:
			parts = append(parts, outcomeLabel(r.Outcome))
		}
	}
	return head + " — " + strings.Join(parts, "; ")
}

// OK reports whether every run of an answered request succeeded.
func (c requestCard) OK() bool {
	for _, r := range c.Runs {
		if r.Outcome != sitetools.OutcomeOK {
			return false
		}
	}
	return c.Status == approvals.StatusAllowed
}

// shorten cuts a result for one line, at a rune boundary, compacting JSON.
func shorten(s string, n int) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) == nil {
		s = b.String()
		var str string
		if json.Unmarshal([]byte(s), &str) == nil {
			s = str
		}
	}
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}
