package sitetools

import (
	"fmt"
	"net/url"
	"reflect"
	"unsafe"
)

// MaxSchemaCost bounds how many subschemas gojsonschema may apply to one value of the arguments,
// counted over the deepest arguments allowed. A schema is small (MaxDescriptorBytes), but shared
// definitions referenced from allOf, anyOf or oneOf multiply: ten levels of two references each
// make a thousand checks per value, and a page could make that a billion. Refusing such schemas
// at announce time keeps every call's validation fast.
const MaxSchemaCost = 20_000

// bound measures a translated schema before it is compiled. Besides its cost it finds references
// that loop back to the same subschema without going deeper into the arguments, which would make
// gojsonschema recurse until the process dies.
type bound struct {
	nodes map[string]any // translated JSON pointer -> subschema, to follow "$ref"
	memo  map[costKey]int
	busy  map[costKey]bool
}

type costKey struct {
	node  unsafe.Pointer // identity of a translated schema object
	depth int            // how many more levels the arguments may nest
}

var errSchemaCycle = schemaRefusal("", "refers to itself without going deeper into the arguments, so checking a call would never end")

var errSchemaCost = schemaRefusal("", fmt.Sprintf("is too complex to check: one argument could need more than %d checks; reduce how often allOf, anyOf, oneOf and $ref nest", MaxSchemaCost))

func checkBound(root any, nodes map[string]any) error {
	b := &bound{nodes: nodes, memo: map[costKey]int{}, busy: map[costKey]bool{}}
	_, err := b.cost(root, MaxArgumentDepth)
	return err
}

// cost is how many subschemas apply to a value at most, when depth more levels of arguments
// may follow.
func (b *bound) cost(node any, depth int) (int, error) {
	m, ok := node.(map[string]any)
	if !ok {
		return 1, nil
	}
	key := costKey{reflect.ValueOf(m).UnsafePointer(), depth}
	if c, ok := b.memo[key]; ok {
		return c, nil
	}
	if b.busy[key] {
		return 0, errSchemaCycle
	}
	b.busy[key] = true
	c, err := b.object(m, depth)
	delete(b.busy, key)
	if err != nil {
		return 0, err
	}
	b.memo[key] = c
	return c, nil
}

// object adds the subschemas applied to the same value and, one level down, the worst child.
func (b *bound) object(m map[string]any, depth int) (int, error) {
	total := 1
	add := func(c int, err error) error {
		total += c
		if err == nil && total > MaxSchemaCost {
			err = errSchemaCost
		}
		return err
	}
	for _, child := range b.inPlace(m) {
		if err := add(b.cost(child, depth)); err != nil {
			return 0, err
		}
	}
	if depth == 0 {
		return total, nil
	}
	if err := add(b.below(m, depth-1)); err != nil {
		return 0, err
	}
	return total, nil
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
	for _, v := range deps {
		if _, names := v.([]any); !names {
			out = append(out, v)
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

// below is the cost of the worst single child value: one property gets properties or
// additionalProperties plus every patternProperties that matches, one item gets items or
// additionalItems plus contains.
func (b *bound) below(m map[string]any, depth int) (int, error) {
	prop, err := b.worst(depth, mapValues(m["properties"]), m["additionalProperties"], m["propertyNames"])
	if err != nil {
		return 0, err
	}
	pattern, err := b.sum(depth, mapValues(m["patternProperties"]))
	if err != nil {
		return 0, err
	}
	items, _ := m["items"].([]any)
	if v, ok := m["items"]; ok && items == nil {
		items = []any{v}
	}
	item, err := b.worst(depth, items, m["additionalItems"], m["contains"])
	if err != nil {
		return 0, err
	}
	return prop + pattern + item, nil
}

// worst is the highest cost among list and the extras; contains and propertyNames are counted as
// extras although they add to rather than replace the others, so their cost is added on top.
func (b *bound) worst(depth int, list []any, rest, extra any) (int, error) {
	high := 0
	for _, v := range append(list, rest) {
		if v == nil {
			continue
		}
		c, err := b.cost(v, depth)
		if err != nil {
			return 0, err
		}
		high = max(high, c)
	}
	if extra == nil {
		return high, nil
	}
	c, err := b.cost(extra, depth)
	return high + c, err
}

func (b *bound) sum(depth int, list []any) (int, error) {
	total := 0
	for _, v := range list {
		c, err := b.cost(v, depth)
		if err != nil {
			return 0, err
		}
		total += c
	}
	return total, nil
}

func mapValues(v any) []any {
	m, _ := v.(map[string]any)
	out := make([]any, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}
