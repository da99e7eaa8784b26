package sitetools

import (
	"encoding/json"
	"strings"
	"testing"
)

const issueSchema = `{
	"type": "object",
	"properties": {
		"title": {"type": "string", "minLength": 3, "maxLength": 80},
		"count": {"type": "integer", "minimum": 1, "maximum": 10},
		"state": {"enum": ["open", "closed"]},
		"kind": {"const": "issue"},
		"email": {"type": "string", "format": "email"},
		"slug": {"type": "string", "pattern": "^[a-z-]+$"},
		"step": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 0},
		"labels": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": true},
		"items": {"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}},
		"odd key": {"type": ["string", "null"]},
		"owner": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}]}
	},
	"required": ["title"],
	"additionalProperties": false
}`

func TestValidateNamesEveryViolation(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(issueSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args string
		want []string
	}{
		{`{"title":"Fix the bug"}`, nil},
		{`{"count":"3"}`, []string{
			`arguments.count: must be an integer, got string "3"`,
			`arguments: missing required property "title"`,
		}},
		{`{"title":"ab","count":11,"state":"shut","kind":"pr","email":"nope","slug":"A","step":0.3}`, []string{
			`arguments.count: must be at most 10, got number 11`,
			`arguments.email: must be a valid email, got string "nope"`,
			`arguments.kind: must be exactly "issue", got string "pr"`,
			`arguments.slug: must match the regular expression ^[a-z-]+$, got string "A"`,
			`arguments.state: must be one of "open", "closed", got string "shut"`,
			`arguments.step: must be a multiple of 0.5, got number 0.3`,
			`arguments.title: must be at least 3 characters long, got string "ab"`,
		}},
		{`{"title":"abc","items":[{"title":"a"},{"title":"b"},{"title":4}],"labels":["x","x","y"]}`, []string{
			`arguments.items[2].title: must be a string, got number 4`,
			`arguments.labels: must have at most 2 items, got an array of 3 items`,
			`arguments.labels: must not contain the same item twice`,
		}},
		{`{"title":"abc","items":[{}]}`, []string{`arguments.items[0]: missing required property "title"`}},
		{`{"title":"abc","odd key":1,"extra":true}`, []string{
			`arguments: property "extra" is not allowed here; remove it`,
			`arguments["odd key"]: must be one of string, null, got number 1`,
		}},
		{`{"title":"abc","owner":{"id":"7"}}`, []string{
			`arguments.owner.id: must be an integer, got string "7"`,
			`arguments.owner: must match at least one of the alternatives in anyOf; the closest one's problems are listed too`,
		}},
		{`{"title":"abc","step":0}`, []string{`arguments.step: must be greater than 0, got number 0`}},
	} {
		got := strings.Join(lines(s.Validate(json.RawMessage(tc.args))), "\n")
		if want := strings.Join(tc.want, "\n"); got != want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", tc.args, got, want)
		}
	}
}

func TestValidateRefusesBadArguments(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(`{"a":`, MaxArgumentDepth+1) + "1" + strings.Repeat("}", MaxArgumentDepth+1)
	big := `{"a":"` + strings.Repeat("x", MaxArgumentsBytes) + `"}`
	for _, tc := range []struct{ args, want string }{
		{`[1,2]`, `arguments: must be a JSON object, got an array of 2 items`},
		{`"x"`, `arguments: must be a JSON object, got string "x"`},
		{`3`, `arguments: must be a JSON object, got number 3`},
		{`{"a":`, `arguments: are not valid JSON; send a JSON object`},
		{`{} {}`, `arguments: are not valid JSON; send a JSON object`},
		{deep, `arguments: nest deeper than 32 levels; flatten them`},
		{big, `arguments: are 1048584 bytes; the limit is 1048576, so send less data`},
		{``, ``},
		{`null`, ``},
		{` {} `, ``},
	} {
		got := strings.Join(lines(s.Validate(json.RawMessage(tc.args))), "\n")
		if got != tc.want {
			t.Errorf("%.30s: got %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestValidateMissingArgumentsAgainstRequired(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"required":["q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := lines(s.Validate(nil))
	if len(got) != 1 || got[0] != `arguments: missing required property "q"` {
		t.Fatalf("got %q", got)
	}
}

func TestValidatePhrasesCombinators(t *testing.T) {
	for _, tc := range []struct{ schema, args, want string }{
		{`{"properties":{"a":{"oneOf":[{"type":"integer"},{"type":"number"}]}}}`, `{"a":1}`,
			`arguments.a: must match exactly one of the alternatives in oneOf`},
		{`{"properties":{"a":{"not":{"type":"string"}}}}`, `{"a":"s"}`,
			`arguments.a: must not match the schema given in "not"`},
		{`{"if":{"required":["a"]},"then":{"required":["b"]}}`, `{"a":1}`,
			"arguments: missing required property \"b\"\narguments: must match the \"then\" schema, since it matches the \"if\" schema"},
		{`{"properties":{"t":{"contains":{"const":1}}}}`, `{"t":[2]}`,
			"arguments.t: must contain at least one item matching the \"contains\" schema\narguments.t[0]: must be exactly 1, got number 2"},
		{`{"properties":{"t":{"prefixItems":[{}],"items":false}}}`, `{"t":[1,2]}`,
			`arguments.t: has more items than the schema lists; remove the extra items`},
		{`{"properties":{"a":false}}`, `{"a":1}`, `arguments.a: is not allowed here; remove it`},
		{`{"dependentRequired":{"card":["cvv"]}}`, `{"card":1}`,
			`arguments: missing property "cvv", which another property present here requires`},
		{`{"propertyNames":{"maxLength":3}}`, `{"long":1}`,
			"arguments: must be at most 3 characters long, got string \"long\"\narguments: property name \"long\" is not allowed here"},
		{`{"minProperties":2}`, `{"a":1}`, `arguments: must have at least 2 properties, got an object with 1 property`},
	} {
		s, err := CompileSchema(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(lines(s.Validate(json.RawMessage(tc.args))), "\n")
		if got != tc.want {
			t.Errorf("%s %s:\ngot\n%s\nwant\n%s", tc.schema, tc.args, got, tc.want)
		}
	}
}

func lines(vs []Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

// TestValidateCountsAgree: "at least 1 characters" read wrong (issue 11, item 8).
func TestValidateCountsAgree(t *testing.T) {
	for _, tc := range []struct{ schema, args, want string }{
		{`{"properties":{"a":{"minLength":1}}}`, `{"a":""}`, `arguments.a: must be at least 1 character long, got string ""`},
		{`{"properties":{"a":{"maxLength":1}}}`, `{"a":"ab"}`, `arguments.a: must be at most 1 character long, got string "ab"`},
		{`{"properties":{"a":{"maxLength":2}}}`, `{"a":"abc"}`, `arguments.a: must be at most 2 characters long, got string "abc"`},
		{`{"properties":{"a":{"minItems":1}}}`, `{"a":[]}`, `arguments.a: must have at least 1 item, got an array of 0 items`},
		{`{"properties":{"a":{"maxItems":1}}}`, `{"a":[1,2]}`, `arguments.a: must have at most 1 item, got an array of 2 items`},
		{`{"minProperties":1}`, `{}`, `arguments: must have at least 1 property, got an object with 0 properties`},
		{`{"maxProperties":1}`, `{"a":1,"b":2}`, `arguments: must have at most 1 property, got an object with 2 properties`},
	} {
		s, err := CompileSchema(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(lines(s.Validate(json.RawMessage(tc.args))), "\n"); got != tc.want {
			t.Errorf("%s %s:\ngot  %s\nwant %s", tc.schema, tc.args, got, tc.want)
		}
	}
}
