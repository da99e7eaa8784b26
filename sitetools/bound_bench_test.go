package sitetools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// costly is a schema that makes gojsonschema work hard, and arguments of n values for it.
type costly struct {
	name   string
	schema string
	args   func(n int) string
}

func repeatJoin(item string, n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(item+",", n-1) + item
}

// chainSchema is the example: an allOf/$ref chain of levels definitions, each referring
// twice to the next, over an array's items.
func chainSchema(levels int) string {
	var b strings.Builder
	b.WriteString(`{"properties":{"a":{"type":"array","items":{"$ref":"#/$defs/d0"}}},"$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string","minLength":2}}}`, levels)
	return b.String()
}

func patternsSchema(n int) string {
	var b strings.Builder
	b.WriteString(`{"patternProperties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"^k%d[a-z]*x$":{"type":"integer"}`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

func keysArgs(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%dabcx":"v"`, i)
	}
	b.WriteString("}")
	return b.String()
}

func enumSchema(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf(`"value-%d"`, i)
	}
	return `{"properties":{"a":{"type":"array","items":{"enum":[` + strings.Join(vals, ",") + `]}}}}`
}

func requiredSchema(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(`"p%d"`, i)
	}
	return `{"properties":{"a":{"type":"array","items":{"type":"object","required":[` + strings.Join(names, ",") + `]}}}}`
}

func anyOfSchema(n int) string {
	alts := make([]string, n)
	for i := range alts {
		alts[i] = fmt.Sprintf(`{"type":"string","minLength":%d,"pattern":"^x"}`, i+5)
	}
	return `{"properties":{"a":{"type":"array","items":{"anyOf":[` + strings.Join(alts, ",") + `]}}}}`
}

// costliest are the shapes the cost model was calibrated on: each weight in bound.go is driven
// by one of them.
var costliest = []costly{
	{"flat-values", `{}`, func(n int) string { return `{"a":[` + repeatJoin("0", n) + `]}` }},
	{"typed-items-valid", `{"properties":{"a":{"type":"array","items":{"type":"integer","minimum":0}}}}`,
		func(n int) string { return `{"a":[` + repeatJoin("1", n) + `]}` }},
	{"every-item-fails", `{"properties":{"a":{"type":"array","items":{"type":"string"}}}}`,
		func(n int) string { return `{"a":[` + repeatJoin("0", n) + `]}` }},
	{"allOf-ref-chain-7", chainSchema(7), func(n int) string { return `{"a":[` + repeatJoin(`"x"`, n) + `]}` }},
	{"patternProperties-100", patternsSchema(100), keysArgs},
	{"enum-2000-fails", enumSchema(2000), func(n int) string { return `{"a":[` + repeatJoin(`"nope"`, n) + `]}` }},
	{"required-200-fails", requiredSchema(200), func(n int) string { return `{"a":[` + repeatJoin(`{}`, n) + `]}` }},
	{"anyOf-50-fails", anyOfSchema(50), func(n int) string { return `{"a":[` + repeatJoin(`"y"`, n) + `]}` }},
	{"const-on-big-object", `{"properties":{"a":{"const":{"k":1}}}}`,
		func(n int) string { return `{"a":{"k":[` + repeatJoin(`"abcdefghij"`, n) + `]}}` }},
	{"uniqueItems-strings", `{"properties":{"a":{"type":"array","uniqueItems":true}}}`,
		func(n int) string { return `{"a":[` + repeatJoin(`"abcdefghijklmnopqrstuvwxyz"`, n) + `]}` }},
	{"pattern-large-program", `{"properties":{"a":{"type":"string","pattern":"^(a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p){1,200}$"}}}`,
		func(n int) string { return `{"a":"` + strings.Repeat("abcdefghijklmnop", n) + `"}` }},
	{"big-exponents", `{"properties":{"a":{"type":"array","items":{"type":"number","minimum":0,"multipleOf":0.5}}}}`,
		func(n int) string { return `{"a":[` + repeatJoin(`1e-10000`, n) + `]}` }},
	{"long-numbers", `{"properties":{"a":{"type":"array","items":{"type":"integer","maximum":0}}}}`,
		func(n int) string { return `{"a":[` + repeatJoin(strings.Repeat("9", MaxNumberDigits), n) + `]}` }},
	{"format-email-items", `{"properties":{"a":{"type":"array","items":{"type":"string","format":"email"}}}}`,
		func(n int) string { return `{"a":[` + repeatJoin(`"not an email at all, clearly"`, n) + `]}` }},
	{"tree-32-deep", `{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}},"v":{"type":"string","minLength":3}}}},"$ref":"#/$defs/n"}`,
		treeArgs},
}

// treeArgs nests objects 15 levels deep (30 with their arrays), n leaves wide at the bottom.
func treeArgs(n int) string {
	leaf := `{"v":"x"}`
	inner := `{"v":"x","c":[` + repeatJoin(leaf, n) + `]}`
	for range 14 {
		inner = `{"v":"x","c":[` + inner + `]}`
	}
	return inner
}

// largestAccepted finds the largest n whose arguments the budget accepts and that fit in
// MaxArgumentsBytes.
func largestAccepted(s *Schema, c costly) (int, string) {
	fits := func(n int) bool {
		args := c.args(n)
		return len(args) <= MaxArgumentsBytes && s.withinBudget([]byte(args), measure([]byte(args))) == nil
	}
	lo, hi := 1, 2
	for fits(hi) && hi < 1<<22 {
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, c.args(lo)
}

// BenchmarkValidateCostliest runs Validate on the largest arguments the budget accepts for each
// of the costliest shapes, and reports the process's CPU time per call (cpu-ms/op), GC included:
// each must stay under 50 ms (docs/BENCHMARKS.md, "Validation is bounded").
func BenchmarkValidateCostliest(b *testing.B) {
	for _, c := range costliest {
		b.Run(c.name, func(b *testing.B) {
			s, err := CompileSchema(json.RawMessage(c.schema))
			if err != nil {
				b.Fatal(err)
			}
			n, args := largestAccepted(s, c)
			raw := json.RawMessage(args)
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			for b.Loop() {
				if _, aerr := s.Check(raw); aerr != nil {
					b.Fatal(aerr)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(n), "n")
			b.ReportMetric(float64(len(args)), "bytes")
		})
	}
}
