package sitetools

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestArgumentsReadOneWayOnly: arguments the validator and a page's parser could read
// differently are refused before validation, saying where: a property named twice in one object
// (encoding/json, which the validator uses, keeps the last; the approval card's JSON shows both),
// also when the two names differ only in escapes; and a number a float64 does not hold, which the page would read as
// Infinity or 0 — so {"exclusiveMinimum": 0}, checked exactly, passed 1e-400 and the page got 0 —
// or as another number: the card showed the account 9007199254740993 and the page got ...992.
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
		{`{"to":{"account":9007199254740993}}`, "arguments.to.account", "a browser reads it as 9007199254740992"},
		{`{"big":12345678901234567890123}`, "arguments.big", "reads it as 1.2345678901234568e+22"},
		{`{"amount":1.00000000000000001}`, "arguments.amount", "reads it as 1:"},
		{`{"x":[1,-0.1000000000000000055511151231257828]}`, "arguments.x[1]", "reads it as -0.1:"},
	} {
		_, aerr := s.Check(json.RawMessage(tc.args))
		if aerr == nil || aerr.Code != CodeInvalidArguments || !aerr.Ambiguous || aerr.Path != tc.path || !strings.Contains(aerr.Message, tc.want) {
			t.Errorf("%.80s: got %+v, want a refusal at %s saying %q", tc.args, aerr, tc.path, tc.want)
		}
	}
	for _, ok := range []string{
		`{"amount":5,"note":"{\"amount\":1,\"amount\":2}","tags":["a","a"],"m":{"amount":1}}`, // the same name in another object, or inside a string
		`{"amount":1e300,"small":5e-324,"zero":0e5000,"neg":-0.0,"big":9007199254740992,"e":1E2,"f":0.10,"g":1.5000000000000000000000,"h":1.5e-320}`,
		`{"e":{},"a":[],"n":[[{}],{"x":{"y":[1,{"z":2}]}}],"s":"\\\"{,"}`,
		`{}`, ``, `null`,
	} {
		if v, aerr := s.Check(json.RawMessage(ok)); aerr != nil || len(v) != 0 {
			t.Errorf("%s: refused: %v %v", ok, aerr, v)
		}
	}
}

// TestKeptByFloatAgreesWithExactArithmetic: a number is kept when the value of its text, as an
// exact rational, is the value of the float64 it parses to; math/big says so without our reading
// of decimals, over random float64s written in several ways and the same with a digit changed.
func TestKeptByFloatAgreesWithExactArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsInf(f, 0) || math.IsNaN(f) {
			continue
		}
		for _, text := range []string{
			strconv.FormatFloat(f, 'e', -1, 64),
			strconv.FormatFloat(f, 'g', 17, 64),
			strconv.FormatFloat(f, 'e', 20, 64),
			strconv.FormatFloat(f, 'e', 15, 64),
			strconv.FormatFloat(f, 'e', -1, 64)[:1] + "0" + strconv.FormatFloat(f, 'e', -1, 64)[1:],
			strconv.Itoa(int(r.Int64N(1<<62))) + strconv.Itoa(r.IntN(10)),
		} {
			want := exactlyTheFloat(t, text)
			if got := keptByFloat([]byte(text)); got != want {
				t.Fatalf("%s: keptByFloat %v, exact arithmetic says %v", text, got, want)
			}
		}
	}
}

func exactlyTheFloat(t *testing.T, text string) bool {
	written, ok := new(big.Rat).SetString(text)
	if !ok {
		t.Fatalf("%s is no number", text)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return true // out of range: heldByFloat's to refuse
	}
	shortest, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'e', -1, 64))
	return written.Cmp(shortest) == 0
}
