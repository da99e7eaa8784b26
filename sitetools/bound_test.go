package sitetools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidationIsBounded: gojsonschema cannot be stopped once it runs, so arguments whose cost
// against the schema is over MaxValidationCost are refused before it runs, and schemas whose cost
// cannot be bounded are refused at announce time (issue 11, item 3). Without the budget, the
// first case below ran for seconds.
func TestValidationIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, schema, args, want string
	}{
		{"allOf chain over 10,000 items", chainSchema(7), `{"a":[` + repeatJoin(`"x"`, 10000) + `]}`,
			"arguments: hold 10002 values, too many to check against this tool's input schema in one call: it allows about "},
		{"100 patterns over 40,000 keys", patternsSchema(100), keysArgs(40000), "hold 40001 values, too many to check"},
		{"a typed array of 100,000 integers", `{"properties":{"a":{"type":"array","items":{"type":"integer","minimum":0}}}}`,
			`{"a":[` + repeatJoin("1", 100000) + `]}`, "it allows about 5"},
		{"a number of 1,001 digits", `{}`, `{"a":[1,` + strings.Repeat("7", 1001) + `]}`,
			"arguments.a[1]: is a number too long to check (at byte 8 of the arguments): at most 1000 digits and an exponent of at most 10000"},
		{"an exponent of 10,001", `{}`, `{"a":{"b":-1.5e-10001}}`, "arguments.a.b: is a number too long to check"},
	} {
		s, err := CompileSchema(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		start := time.Now()
		_, aerr := s.Check(json.RawMessage(tc.args))
		if aerr == nil || aerr.Code != CodeArgumentsTooLarge || !strings.Contains(aerr.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal saying %q", tc.name, aerr, tc.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refused only after %v", tc.name, d)
		}
	}
}

// TestBudgetAcceptsOrdinaryCalls: the budget leaves room for real calls.
func TestBudgetAcceptsOrdinaryCalls(t *testing.T) {
	for _, tc := range []struct{ schema, args string }{
		{issueSchema, `{"title":"Fix the login bug","count":3,"state":"open","labels":["bug","auth"],"items":[{"title":"a"},{"title":"b"}],"owner":{"id":7}}`},
		{`{"properties":{"ids":{"type":"array","items":{"type":"integer","minimum":1}}}}`, `{"ids":[` + repeatJoin("12345", 2000) + `]}`},
		{`{"properties":{"doc":{"type":"string","maxLength":1000000}}}`, `{"doc":"` + strings.Repeat("long text ", 100000) + `"}`},
		{`{}`, `{"rows":[` + repeatJoin(`{"a":1,"b":"two"}`, 20000) + `]}`},
		{`{}`, `{"n":1e300,"m":12345678901234567000}`}, // 1e400 and 12345678901234567891 are refused: a browser reads Infinity, and 12345678901234567000 (ambiguous_test.go)
	} {
		s, err := CompileSchema(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		if _, aerr := s.Check(json.RawMessage(tc.args)); aerr != nil {
			t.Errorf("%.60s: refused: %v", tc.args, aerr)
		}
	}
}

// TestUnboundedSchemasAreRefused: the issue's 11-level chain and 500 patterns are refused when
// the page announces them, and so is format "regex", whose cost per byte has no useful bound.
func TestUnboundedSchemasAreRefused(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{chainSchema(11), "is too complex to check"},
		{patternsSchema(500), "is too complex to check"},
		{`{"properties":{"re":{"type":"string","format":"regex"}}}`, `uses "format": "regex"`},
	} {
		_, err := CompileSchema(json.RawMessage(tc.schema))
		if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: got %v, want %q", tc.schema, err, tc.want)
		}
	}
}
