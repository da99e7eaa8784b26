package sitetools

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp/syntax"
	"unsafe"
)

// MaxSchemaCost bounds the work gojsonschema may do for one value of the arguments, in checks (see
// the weights below), wherever in the arguments the value sits. A schema is small
// (MaxDescriptorBytes), but shared definitions referenced from allOf, anyOf or oneOf multiply:
// ten levels of two references each make a thousand checks per value, and a page could make that
// a billion. Refusing such schemas at announce time means every schema that is taken has a cost
// per value that is known, so that a call's cost can be bounded before it is checked (see
// MaxValidationCost).
const MaxSchemaCost = 20_000

// MaxValidationCost bounds the work of checking one call's arguments, in checks: the number of
// values at each depth of the arguments times what the schema costs a value there, plus what it
// costs per byte. gojsonschema cannot be stopped once it runs, so arguments over the budget are
// refused before it runs, with the number of values this schema allows. On the reference machine
// (docs/BENCHMARKS.md, "Validation is bounded") a check costs about 100 ns of CPU, so the budget
// keeps every accepted call under 50 ms of CPU; a simple schema takes thousands of values, a
// schema without constraints on them a hundred thousand.
const MaxValidationCost = 300_000

// Weights of the cost model, in checks. One check is about 100 ns of CPU on the reference machine:
// one subschema applied to one value, where nothing else applies. The others were measured against
// it (BenchmarkValidateCostliest): gojsonschema compares numbers as big.Rat, formats every error
// with text/template (and we phrase, sort and list it), compiles every patternProperties pattern
// again for every key, and marshals a value three times over for enum, const and uniqueItems.
const (
	weightValue       = 2.0   // decoding one value, and walking it for paths and depth
	weightByte        = 0.02  // reading one byte: UTF-8, measuring, decoding
	weightNumber      = 10.0  // one numeric keyword (big.Rat)
	weightError       = 40.0  // one error, formatted by gojsonschema, then phrased and sorted by us
	weightErrorByte   = 0.1   // per byte of an error's text (an enum's list of values)
	weightMarshalCall = 30.0  // marshalling a value for enum, const or uniqueItems
	weightMarshal     = 0.8   // per byte so marshalled
	weightEnumEntry   = 0.05  // comparing with one entry of an enum
	weightCompile     = 3.0   // per instruction and byte of a regular expression compiled per key
	weightMatchByte   = 0.002 // per instruction and byte of a regular expression's match
	weightFormat      = 10.0  // one format check (parsing a date, an address, ...)
	weightFormatByte  = 0.5   // per byte of a string checked against a format
	weightTextByte    = 0.005 // per byte of a string's length counted (minLength, maxLength)
)

// errorGroups are the keywords that can each report an error, by the type of value they check.
// gojsonschema reports a value of the wrong type once and checks nothing else of it, so a value
// gets the errors of one group at most (or the type error alone).
var errorGroups = [][]string{
	{"minLength", "maxLength", "pattern", "format"},
	{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
	{"minItems", "maxItems", "contains"},
	{"minProperties", "maxProperties"},
}

// anyTypeErrors are the keywords that can report an error whatever the value's type.
var anyTypeErrors = []string{"const", "enum", "allOf", "anyOf", "oneOf", "not", "if"}

// cost is what a schema costs the values it applies to: perValue[k] is the work for one value k
// levels below the one the schema applies to, perByte[k] the work per byte of such a value.
type cost struct {
	perValue []float64
	perByte  []float64
	applied  []float64 // how many subschemas apply to one value k levels below, for numbers
}

func newCost(depth int) cost {
	return cost{perValue: make([]float64, depth+1), perByte: make([]float64, depth+1), applied: make([]float64, depth+1)}
}

// add adds c, shifted down by levels, to the cost.
func (x cost) add(c cost, levels int) {
	for k := range c.perValue {
		if k+levels < len(x.perValue) {
			x.perValue[k+levels] += c.perValue[k]
			x.perByte[k+levels] += c.perByte[k]
			x.applied[k+levels] += c.applied[k]
		}
	}
}

// worst keeps, level by level, the higher of x and c: the child is one or the other.
func (x cost) worst(c cost) {
	for k := range c.perValue {
		x.perValue[k] = max(x.perValue[k], c.perValue[k])
		x.perByte[k] = max(x.perByte[k], c.perByte[k])
		x.applied[k] = max(x.applied[k], c.applied[k])
	}
}

// peak is the most one value may cost, for the announce-time limit.
func (x cost) peak() float64 {
	high := 0.0
	for _, v := range x.perValue {
		high = max(high, v)
	}
	return high
}

// bound measures a translated schema before it is compiled. Besides its cost it finds references
// that loop back to the same subschema without going deeper into the arguments, which would make
// gojsonschema recurse until the process dies.
type bound struct {
	nodes map[string]any // translated JSON pointer -> subschema, to follow "$ref"
	memo  map[costKey]cost
	busy  map[costKey]bool
}

type costKey struct {
	node  unsafe.Pointer // identity of a translated schema object
	depth int            // how many more levels the arguments may nest
}

var errSchemaCycle = schemaRefusal("", "refers to itself without going deeper into the arguments, so checking a call would never end")

var errSchemaCost = schemaRefusal("", fmt.Sprintf("is too complex to check: one argument could need more than %d checks; reduce how often allOf, anyOf, oneOf and $ref nest, and how many patternProperties there are", MaxSchemaCost))

var errFormatRegex = schemaRefusal("", `uses "format": "regex", which checks a value by compiling it as a regular expression: seven bytes ("a{1000}") can cost a thousand instructions, so the cost of a call cannot be bounded; remove the format, and check the expression in the page`)

// checkBound measures the translated schema: its cost per value at each depth of the arguments,
// or a refusal when one value could cost more than MaxSchemaCost or checking would never end.
func checkBound(root any, nodes map[string]any) (cost, error) {
	b := &bound{nodes: nodes, memo: map[costKey]cost{}, busy: map[costKey]bool{}}
	c, err := b.cost(root, MaxArgumentDepth)
	if err == nil && c.peak() > MaxSchemaCost {
		err = errSchemaCost
	}
	return c, err
}

// cost is what node costs a value, and the values below it, when depth more levels of arguments
// may follow.
func (b *bound) cost(node any, depth int) (cost, error) {
	m, ok := node.(map[string]any)
	if !ok {
		c := newCost(depth)
		c.perValue[0], c.applied[0] = 1, 1
		if node == false {
			c.perValue[0] += weightError
		}
		return c, nil
	}
	key := costKey{reflect.ValueOf(m).UnsafePointer(), depth}
	if c, ok := b.memo[key]; ok {
		return c, nil
	}
	if b.busy[key] {
		return cost{}, errSchemaCycle
	}
	b.busy[key] = true
	c, err := b.object(m, depth)
	delete(b.busy, key)
	if err != nil {
		return cost{}, err
	}
	b.memo[key] = c
	return c, nil
}

// object adds the node's own checks, the subschemas applied to the same value and, one level
// down, the worst child.
func (b *bound) object(m map[string]any, depth int) (cost, error) {
	if m["format"] == "regex" {
		return cost{}, errFormatRegex
	}
	c := newCost(depth)
	c.perValue[0], c.perByte[0] = own(m)
	c.applied[0] = 1
	for _, child := range b.inPlace(m) {
		cc, err := b.cost(child, depth)
		if err != nil {
			return cost{}, err
		}
		c.add(cc, 0)
		if c.peak() > MaxSchemaCost {
			return cost{}, errSchemaCost
		}
	}
	if depth == 0 {
		return c, nil
	}
	below, err := b.below(m, depth-1)
	if err != nil {
		return cost{}, err
	}
	c.add(below, 1)
	if c.peak() > MaxSchemaCost {
		return cost{}, errSchemaCost
	}
	return c, nil
}

// inPlace lists the subschemas that apply to the same value as m.
func (b *bound) inPlace(m map[string]any) []any {
	var out []any
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := m[k].([]any)
		out = append(out, list...)
	}
	for _, k := range []string{"not", "if", "then", "else"} {
		if v, ok := m[k]; ok {
			out = append(out, v)
		}
	}
	deps, _ := m["dependencies"].(map[string]any)
	for _, k := range sortedKeys(deps) {
		if _, names := deps[k].([]any); !names {
			out = append(out, deps[k])
		}
	}
	if ref, ok := m["$ref"].(string); ok {
		out = append(out, b.target(ref))
	}
	return out
}

// target finds a rewritten reference; one the translator could not place costs nothing here and
// is refused by the translator itself.
func (b *bound) target(ref string) any {
	u, err := url.Parse(ref)
	if err != nil {
		return nil
	}
	return b.nodes[u.Fragment]
}

// below is the cost of the worst single child value. A child is a property or an item, never
// both. A property gets properties or additionalProperties, plus every patternProperties that
// matches (all may) and propertyNames, and pays for compiling every pattern again; an item gets
// items or additionalItems, plus contains, and pays for uniqueItems' marshalling.
func (b *bound) below(m map[string]any, depth int) (cost, error) {
	prop, err := b.worstOf(depth, append(mapValues(m["properties"]), m["additionalProperties"]))
	if err != nil {
		return cost{}, err
	}
	extra := mapValues(m["patternProperties"])
	if v, ok := m["propertyNames"]; ok {
		extra = append(extra, v)
	}
	if err := b.addAll(prop, depth, extra); err != nil {
		return cost{}, err
	}
	prop.perValue[0] += patternsCompile(m["patternProperties"])
	if _, ok := m["propertyNames"]; ok {
		prop.perValue[0] += weightError // the name's own error, beside the propertyNames errors
	}
	if m["additionalProperties"] == false {
		prop.perValue[0] += weightError
	}
	items, _ := m["items"].([]any)
	if v, ok := m["items"]; ok && items == nil {
		items = []any{v}
	}
	item, err := b.worstOf(depth, append(items, m["additionalItems"]))
	if err != nil {
		return cost{}, err
	}
	if v, ok := m["contains"]; ok {
		if err := b.addAll(item, depth, []any{v}); err != nil {
			return cost{}, err
		}
	}
	if m["uniqueItems"] == true {
		item.perValue[0] += weightMarshalCall + weightError
		item.perByte[0] += weightMarshal
	}
	if m["additionalItems"] == false {
		item.perValue[0] += weightError
	}
	prop.worst(item)
	return prop, nil
}

// worstOf is, level by level, the highest cost among list; a missing schema costs nothing.
func (b *bound) worstOf(depth int, list []any) (cost, error) {
	out := newCost(depth)
	for _, v := range list {
		if v == nil {
			continue
		}
		c, err := b.cost(v, depth)
		if err != nil {
			return cost{}, err
		}
		out.worst(c)
	}
	return out, nil
}

func (b *bound) addAll(out cost, depth int, list []any) error {
	for _, v := range list {
		c, err := b.cost(v, depth)
		if err != nil {
			return err
		}
		out.add(c, 0)
	}
	return nil
}

// own is what the node's own keywords cost one value: per value, the checks and every error they
// could report; per byte of the value, the keywords whose work grows with it.
func own(m map[string]any) (perValue, perByte float64) {
	perValue = 1 + weightError*float64(ownErrors(m))
	perValue += weightNumber * float64(countKeys(m, errorGroups[1]))
	if _, ok := m["format"]; ok {
		perValue += weightFormat
	}
	if enum, ok := m["enum"].([]any); ok {
		perValue += weightMarshalCall + weightEnumEntry*float64(len(enum)) + weightErrorByte*float64(jsonLen(enum))
		perByte += weightMarshal
	}
	if _, ok := m["const"]; ok {
		perValue += weightMarshalCall + weightErrorByte*float64(jsonLen(m["const"]))
		perByte += weightMarshal
	}
	return perValue, perByte + ownPerByte(m)
}

// ownErrors is how many errors the node's own keywords can report for one value.
func ownErrors(m map[string]any) int {
	most := 0
	for _, g := range errorGroups {
		n := 0
		for _, k := range g {
			if _, ok := m[k]; ok {
				n++
			}
		}
		most = max(most, n)
	}
	required, _ := m["required"].([]any)
	deps, _ := m["dependencies"].(map[string]any)
	objects := len(required)
	for _, v := range deps {
		names, _ := v.([]any)
		objects += len(names)
	}
	most = max(most, objects+countKeys(m, errorGroups[3]))
	n := most + countKeys(m, anyTypeErrors)
	if _, typed := m["type"]; typed {
		n = max(n, 1)
	}
	return n
}

func countKeys(m map[string]any, keys []string) int {
	n := 0
	for _, k := range keys {
		if _, ok := m[k]; ok {
			n++
		}
	}
	return n
}

// ownPerByte covers the string keywords, whose work grows with the string.
func ownPerByte(m map[string]any) float64 {
	perByte := 0.0
	if p, ok := m["pattern"].(string); ok {
		perByte += weightMatchByte * float64(instructions(p))
	}
	if _, ok := m["format"].(string); ok {
		perByte += weightFormatByte
	}
	if _, ok := m["minLength"]; ok {
		perByte += weightTextByte
	}
	if _, ok := m["maxLength"]; ok {
		perByte += weightTextByte
	}
	return perByte
}

// patternsCompile is what gojsonschema spends on each key of an object compiling every
// patternProperties pattern again (it calls regexp.MatchString).
func patternsCompile(v any) float64 {
	pats, _ := v.(map[string]any)
	total := 0.0
	for p := range pats {
		total += weightCompile * float64(instructions(p)+len(p))
	}
	return total
}

// instructions is the size of a regular expression's compiled program, which bounds both its
// compile work and its work per byte matched. A pattern that does not compile costs nothing here:
// gojsonschema refuses it when the schema is compiled.
func instructions(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	return len(prog.Inst)
}

func jsonLen(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

func mapValues(v any) []any {
	m, _ := v.(map[string]any)
	out := make([]any, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}
