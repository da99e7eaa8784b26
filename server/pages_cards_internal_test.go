package server

import (
	"encoding/json"
	"testing"
)

// TestCardFieldsOfPatternProperties: a name one of the schema's
// patternProperties matches is the tool's own, as a listed one is: its row
// is not marked as undeclared, and it takes the pattern's title and
// description. A name no pattern matches still is, also in a schema that
// lists no properties by name.
func TestCardFieldsOfPatternProperties(t *testing.T) {
	cases := []struct {
		name, schema, args string
		want               map[string]argField // by name: Title, Description, Undeclared
	}{
		{"listed, matched and neither",
			`{"type":"object","properties":{"item":{"type":"string"}},"patternProperties":{"^x-":{"type":"string","title":"Header","description":"sent as is"}}}`,
			`{"item":"tea","x-trace":"1","іtem":"coffee"}`,
			map[string]argField{"item": {Title: "item"}, "x-trace": {Title: "Header", Description: "sent as is"}, "іtem": {Title: "іtem", Undeclared: true}}},
		{"only patterns",
			`{"type":"object","patternProperties":{"^[a-z]+$":{"type":"string"}}}`,
			`{"tea":"1","TEA":"2"}`,
			map[string]argField{"tea": {Title: "tea"}, "TEA": {Title: "TEA", Undeclared: true}}},
		{"a pattern that does not compile matches nothing",
			`{"type":"object","properties":{"a":{}},"patternProperties":{"(":{}}}`,
			`{"a":1,"(":2}`,
			map[string]argField{"a": {Title: "a"}, "(": {Title: "(", Undeclared: true}}},
		{"no schema declares nothing, so nothing is marked",
			`{"type":"object"}`,
			`{"b":1}`,
			map[string]argField{"b": {Title: "b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := argFields(c.args, json.RawMessage(c.schema))
			if len(got) != len(c.want) {
				t.Fatalf("%d fields, want %d: %+v", len(got), len(c.want), got)
			}
			for _, f := range got {
				w, ok := c.want[f.Name]
				if !ok || f.Title != w.Title || f.Description != w.Description || f.Undeclared != w.Undeclared {
					t.Errorf("%q: title %q, description %q, undeclared %v; want %+v", f.Name, f.Title, f.Description, f.Undeclared, w)
				}
			}
		})
	}
}
