package sitetools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestArgumentsReadOneWayOnly: arguments the validator and a page's parser could read
// differently are refused before validation, saying where: a property named twice in one object
// (encoding/json, which the validator uses, keeps the last; the approval card's JSON shows both),
// also when the two names differ only in escapes; and a number a float64 does not hold, which the page would read as
// Infinity or 0 — so {"exclusiveMinimum": 0}, checked exactly, passed 1e-400 and the page got 0.
func TestArgumentsReadOneWayOnly(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, path, want string }{
		{`{"amount":1,"to":"alice","amount":1000}`, "arguments", `the property "amount" more than once`},
		{`{"to":{"name":"a","iban":"x","name":"b"}}`, "arguments.to", `"name" more than once`},
		{`{"list":[{"a":1},{"b":1,"b":2}]}`, "arguments.list[1]", `"b" more than once`},
		{`{"amount":1,"\u0061mount":2}`, "arguments", `"amount" more than once`},
		{`{"amount":1e-400}`, "arguments.amount", "the page would read it as Infinity or 0"},
		{`{"amount":1e400}`, "arguments.amount", "Infinity or 0"},
		{`{"x":[-1E+309]}`, "arguments.x[0]", "Infinity or 0"},
		{`{"amount":0.` + strings.Repeat("0", 400) + `1}`, "arguments.amount", "Infinity or 0"},
		{`{"amount":1` + strings.Repeat("0", 400) + `}`, "arguments.amount", "Infinity or 0"},
	} {
		_, aerr := s.Check(json.RawMessage(tc.args))
		if aerr == nil || aerr.Code != CodeInvalidArguments || !aerr.Ambiguous || aerr.Path != tc.path || !strings.Contains(aerr.Message, tc.want) {
			t.Errorf("%.80s: got %+v, want a refusal at %s saying %q", tc.args, aerr, tc.path, tc.want)
		}
	}
	for _, ok := range []string{
		`{"amount":5,"note":"{\"amount\":1,\"amount\":2}","tags":["a","a"],"m":{"amount":1}}`, // the same name in another object, or inside a string
		`{"amount":1e300,"small":5e-324,"zero":0e5000,"neg":-0.0,"big":12345678901234567890123}`,
		`{"e":{},"a":[],"n":[[{}],{"x":{"y":[1,{"z":2}]}}],"s":"\\\"{,"}`,
		`{}`, ``, `null`,
	} {
		if v, aerr := s.Check(json.RawMessage(ok)); aerr != nil || len(v) != 0 {
			t.Errorf("%s: refused: %v %v", ok, aerr, v)
		}
	}
}
