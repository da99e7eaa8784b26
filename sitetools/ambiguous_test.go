package sitetools

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"os/exec"
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
		{`{"item":"tea","__proto__":{"to":"mallory"}}`, "arguments", `named "__proto__", which JavaScript reads two ways`},
		{`{"items":[{"n":1},{"\u005f_proto__":{}}]}`, "arguments.items[1]", `"__proto__"`},
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
		`{"amount":5,"note":"{\"amount\":1,\"amount\":2}","tags":["a","a","__proto__"],"m":{"amount":1},"proto":"__proto__"}`, // the same name in another object, or inside a string
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

// TestNumbersAsV8ReadsThem: the refusal's claim, "a browser reads it as X", is V8's own: node's
// JSON.parse and String() of each number (random float64s written several ways, and the cases
// above) give X exactly, and a number is kept exactly when V8's X has the text's value (math/big).
func TestNumbersAsV8ReadsThem(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	texts := []string{"9007199254740993", "12345678901234567890123", "1.00000000000000001", "-0.1000000000000000055511151231257828",
		"1.5e-320", "5e-324", "1e2", "0.10", "1e21", "1e-7", "123456789e-15", "-0.0", "0.30000000000000004", "4.35", "1E+300"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsInf(f, 0) || math.IsNaN(f) {
			continue
		}
		texts = append(texts, strconv.FormatFloat(f, 'e', -1, 64), strconv.FormatFloat(f, 'g', 17, 64), strconv.FormatFloat(f, 'e', 19, 64))
	}
	in, _ := json.Marshal(texts)
	cmd := exec.Command("node", "-e", `let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).map(t=>String(JSON.parse(t))))))`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var v8 []string
	if err := json.Unmarshal(out, &v8); err != nil || len(v8) != len(texts) {
		t.Fatalf("node answered %d of %d: %v", len(v8), len(texts), err)
	}
	for i, text := range texts {
		f, _ := strconv.ParseFloat(text, 64)
		if got := browserReading(f); got != v8[i] {
			t.Errorf("%s: browserReading %s, V8 reads %s", text, got, v8[i])
		}
		written, _ := new(big.Rat).SetString(text)
		read, _ := new(big.Rat).SetString(v8[i])
		if want := written.Cmp(read) == 0; keptByFloat([]byte(text)) != want {
			t.Errorf("%s: keptByFloat %v, V8 reads %s", text, !want, v8[i])
		}
	}
}

// TestProtoIsReadTwoWaysByV8: the reason "__proto__" is refused, from V8 itself: JSON.parse
// makes it an own property (the card's row), and Object.assign, as a page copying its input
// onto defaults would, makes its value the prototype, so "to" inside it reads as an argument.
func TestProtoIsReadTwoWaysByV8(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	out, err := exec.Command("node", "-e", `const a = JSON.parse('{"item":"tea","__proto__":{"to":"mallory"}}');
		console.log(Object.hasOwn(a, "__proto__"), a.to, Object.assign({}, a).to)`).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "true undefined mallory" {
		t.Fatalf("V8 reads it as %q", got)
	}
}
