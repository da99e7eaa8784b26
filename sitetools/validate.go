package sitetools

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// Limits on an agent's arguments, checked before the schema is applied so that validation work is
// bounded whatever the agent sends.
const (
	// MaxArgumentsBytes bounds one call's arguments. Tool arguments are meant to be small; 1 MiB is
	// room for a long document and small enough to validate in milliseconds.
	MaxArgumentsBytes = 1 << 20

	// MaxArgumentDepth bounds how deeply arguments nest. Real tool arguments stay within a few
	// levels; the bound also caps how far a recursive schema is followed (see MaxSchemaCost).
	MaxArgumentDepth = 32
)

// Violation is one way an agent's arguments break the tool's schema. Path is where, written the
// way an agent writes it in code (arguments.items[2].title); Message is what is wrong and what
// would be right, phrased so the agent can fix its call.
type Violation struct {
	Path    string
	Message string
}

// String gives the violation as one line: "arguments.count: must be an integer, got string "3"".
func (v Violation) String() string {
	return v.Path + ": " + v.Message
}

// Validate checks an agent's arguments against the schema and returns every violation, sorted by
// path; none means the call may proceed. Missing arguments (nil, empty or null) are read as {},
// as MCP clients omit arguments for tools that take none.
//
// Validate gives an *ArgumentsError (see Check) as its one violation.
func (s *Schema) Validate(args json.RawMessage) []Violation {
	viol, err := s.Check(args)
	if err != nil {
		return []Violation{err.Violation}
	}
	return viol
}

// Check is Validate that tells a refusal of the arguments as a whole (too large, too much to check
// against this schema, not UTF-8 text, not a JSON object) apart from violations of the schema: the
// first is an *ArgumentsError, returned before the schema is applied, so that gojsonschema, which
// cannot be stopped, only ever runs on arguments whose cost is within MaxValidationCost.
func (s *Schema) Check(args json.RawMessage) ([]Violation, *ArgumentsError) {
	args, aerr := checkText(args)
	if aerr != nil {
		return nil, aerr
	}
	sh := measure(args)
	if aerr := s.withinBudget(args, sh); aerr != nil {
		return nil, aerr
	}
	value, aerr := decodeValue(args, sh)
	if aerr != nil {
		return nil, aerr
	}
	result, err := s.compiled.Validate(document{value})
	if err != nil {
		return []Violation{{Path: "arguments", Message: "could not be checked: " + err.Error()}}, nil
	}
	return violations(result.Errors(), value), nil
}

// violations phrases gojsonschema's errors, drops duplicates (anyOf and oneOf repeat the errors of
// their closest branch) and sorts them so the same call always gets the same answer.
func violations(errs []gojsonschema.ResultError, args any) []Violation {
	type keyed struct {
		line string // v.String(), computed once: sorting thousands of violations compares it often
		v    Violation
	}
	seen := map[Violation]bool{}
	var out []keyed
	for _, e := range errs {
		v := Violation{Path: pathOf(e, args), Message: phrase(e)}
		if !seen[v] {
			seen[v] = true
			out = append(out, keyed{v.String(), v})
		}
	}
	slices.SortFunc(out, func(a, b keyed) int { return strings.Compare(a.line, b.line) })
	vs := make([]Violation, len(out))
	for i, k := range out {
		vs[i] = k.v
	}
	return vs
}

// contextSep separates path segments when reading gojsonschema's context; property names may
// contain dots, but a NUL in a property name is unlikely enough to accept a garbled path.
const contextSep = "\x00"

// pathOf writes the error's location as arguments.a.b[2]["odd key"]. gojsonschema's context does
// not say whether a segment is an index or a key, so the arguments themselves are walked.
func pathOf(e gojsonschema.ResultError, args any) string {
	segments := strings.Split(e.Context().String(contextSep), contextSep)[1:]
	var b strings.Builder
	b.WriteString("arguments")
	node := args
	for _, seg := range segments {
		node = step(&b, node, seg)
	}
	return b.String()
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func step(b *strings.Builder, node any, seg string) any {
	if list, ok := node.([]any); ok {
		b.WriteString("[" + seg + "]")
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(list) {
			return list[i]
		}
		return nil
	}
	if identifier.MatchString(seg) {
		b.WriteString("." + seg)
	} else {
		b.WriteString("[" + strconv.Quote(seg) + "]")
	}
	m, _ := node.(map[string]any)
	return m[seg]
}

// phrase writes one error for an agent: what is wrong and what is expected, with what it sent.
func phrase(e gojsonschema.ResultError) string {
	d := e.Details()
	got := ", got " + describe(e.Value())
	switch e.Type() {
	case "invalid_type":
		return "must be " + typeNames(fmt.Sprint(d["expected"])) + got
	case "required":
		return fmt.Sprintf("missing required property %q", d["property"])
	case "additional_property_not_allowed":
		return fmt.Sprintf("property %q is not allowed here; remove it", d["property"])
	case "invalid_property_name":
		return fmt.Sprintf("property name %q is not allowed here", d["property"])
	case "missing_dependency":
		return fmt.Sprintf("missing property %q, which another property present here requires", d["dependency"])
	}
	if s, ok := phraseValue(e.Type(), d); ok {
		return s + got
	}
	if s, ok := phraseCombinator(e.Type()); ok {
		return s
	}
	return e.Description()
}

// valueFormats phrase the errors about one value's content, by gojsonschema's error type.
var valueFormats = map[string]string{
	"enum":        "must be one of %v",
	"const":       "must be exactly %v",
	"pattern":     "must match the regular expression %v",
	"format":      "must be a valid %v",
	"number_gte":  "must be at least %v",
	"number_gt":   "must be greater than %v",
	"number_lte":  "must be at most %v",
	"number_lt":   "must be less than %v",
	"multiple_of": "must be a multiple of %v",
}

// valueKeys names the detail each of valueFormats quotes ("max" when not listed).
var valueKeys = map[string]string{
	"enum": "allowed", "const": "allowed", "pattern": "pattern", "format": "format",
	"multiple_of": "multiple", "number_gte": "min", "number_gt": "min",
}

// phraseValue covers the errors about one value's content, all followed by what was sent.
func phraseValue(typ string, d gojsonschema.ErrorDetails) (string, bool) {
	if s, ok := phraseCount(typ, d); ok {
		return s, true
	}
	f, ok := valueFormats[typ]
	if !ok {
		return "", false
	}
	key, ok := valueKeys[typ]
	if !ok {
		key = "max"
	}
	return fmt.Sprintf(f, d[key]), true
}

// countLimits are the limits on how many characters, items or properties a value has: the
// phrase, the detail holding the number, and the noun.
var countLimits = map[string][3]string{
	"string_gte":           {"must be at least ", "min", "character"},
	"string_lte":           {"must be at most ", "max", "character"},
	"array_min_items":      {"must have at least ", "min", "item"},
	"array_max_items":      {"must have at most ", "max", "item"},
	"array_min_properties": {"must have at least ", "min", "property"},
	"array_max_properties": {"must have at most ", "max", "property"},
}

// phraseCount covers countLimits, with the noun agreeing with the number ("at least 1
// character", "at most 2 items").
func phraseCount(typ string, d gojsonschema.ErrorDetails) (string, bool) {
	l, ok := countLimits[typ]
	if !ok {
		return "", false
	}
	n, err := strconv.Atoi(fmt.Sprint(d[l[1]]))
	if err != nil {
		return "", false
	}
	s := l[0] + count(n, l[2])
	if l[2] == "character" {
		s += " long"
	}
	return s, true
}

// combinatorPhrases phrase the errors about how a value relates to several subschemas.
var combinatorPhrases = map[string]string{
	"number_any_of":             "must match at least one of the alternatives in anyOf; the closest one's problems are listed too",
	"number_one_of":             "must match exactly one of the alternatives in oneOf",
	"number_all_of":             "must match every schema in allOf",
	"number_not":                "must not match the schema given in \"not\"",
	"condition_then":            "must match the \"then\" schema, since it matches the \"if\" schema",
	"condition_else":            "must match the \"else\" schema, since it does not match the \"if\" schema",
	"contains":                  "must contain at least one item matching the \"contains\" schema",
	"unique":                    "must not contain the same item twice",
	"array_no_additional_items": "has more items than the schema lists; remove the extra items",
	"false":                     "is not allowed here; remove it",
}

// phraseCombinator covers errors about how a value relates to several subschemas. The errors of
// the closest branch are reported beside them.
func phraseCombinator(typ string) (string, bool) {
	s, ok := combinatorPhrases[typ]
	return s, ok
}

// typeNames turns gojsonschema's "integer" or "[string,null]" into "an integer" or "one of
// string, null".
func typeNames(expected string) string {
	if strings.HasPrefix(expected, "[") {
		return "one of " + strings.ReplaceAll(strings.Trim(expected, "[]"), ",", ", ")
	}
	if strings.ContainsAny(expected[:min(1, len(expected))], "aeiou") {
		return "an " + expected
	}
	return "a " + expected
}

// describe names a value for a message: its type, and the value itself when it is short.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + strconv.Quote(clip(t, 40))
	case json.Number:
		return "number " + clip(t.String(), 40)
	case bool:
		return "boolean " + strconv.FormatBool(t)
	case []any:
		return "an array of " + count(len(t), "item")
	case map[string]any:
		return "an object with " + count(len(t), "property")
	}
	return fmt.Sprintf("%v", v)
}

func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return strconv.Itoa(n) + " " + strings.TrimSuffix(noun, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
