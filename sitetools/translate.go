package sitetools

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// MaxSchemaDepth bounds how deeply subschemas may nest. Real tool schemas rarely go past ten
// levels; the bound keeps the translator's recursion and its error messages small.
const MaxSchemaDepth = 64

// dialect is the JSON Schema draft a page's schema declares with $schema.
type dialect int

const (
	dialectUnspecified dialect = iota // no $schema: read as 2020-12, with draft-7 leniency
	dialectDraft4
	dialectDraft6
	dialectDraft7
	dialect2019
	dialect2020
)

// modern reports whether "$ref" has siblings that apply, as in 2019-09 and later. A schema
// without $schema is read this way: WebMCP and MCP take 2020-12 as the default.
func (d dialect) modern() bool {
	return d == dialectUnspecified || d >= dialect2019
}

func (d dialect) String() string {
	switch d {
	case dialectDraft4:
		return "draft-04"
	case dialectDraft6:
		return "draft-06"
	case dialectDraft7:
		return "draft-07"
	case dialect2019:
		return "2019-09"
	case dialect2020:
		return "2020-12"
	}
	return "no $schema"
}

// dialects maps every $schema URI the server accepts, without scheme or trailing "#".
var dialects = map[string]dialect{
	"json-schema.org/draft-04/schema":      dialectDraft4,
	"json-schema.org/draft-06/schema":      dialectDraft6,
	"json-schema.org/draft-07/schema":      dialectDraft7,
	"json-schema.org/draft/2019-09/schema": dialect2019,
	"json-schema.org/draft/2020-12/schema": dialect2020,
}

func parseDialect(v any) (dialect, error) {
	s, ok := v.(string)
	if !ok {
		return 0, schemaRefusal("", "$schema must be a string")
	}
	key := strings.TrimSuffix(s, "#")
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	d, ok := dialects[key]
	if !ok {
		return 0, schemaRefusal("", fmt.Sprintf("$schema %q is not a JSON Schema draft this server knows; use draft-07 or 2020-12", clip(s, 80)))
	}
	return d, nil
}

// assertions are keywords copied unchanged: gojsonschema reads them as every draft does.
var assertions = map[string]bool{
	"type": true, "enum": true, "const": true, "multipleOf": true, "maximum": true,
	"exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true, "maxLength": true,
	"minLength": true, "pattern": true, "format": true, "maxItems": true, "minItems": true,
	"uniqueItems": true, "maxProperties": true, "minProperties": true, "required": true,
}

// singles are keywords whose value is one subschema and that mean the same in every draft.
var singles = map[string]bool{
	"not": true, "if": true, "then": true, "else": true, "additionalProperties": true,
	"propertyNames": true, "contains": true,
}

// schemaMaps are keywords whose value maps names to subschemas; $defs is renamed.
var schemaMaps = map[string]string{
	"properties": "properties", "patternProperties": "patternProperties",
	"definitions": "definitions", "$defs": "definitions",
}

// refused are keywords with no faithful draft-7 equivalent, each with why.
var refused = map[string]string{
	"$dynamicRef":   "uses $dynamicRef, which has no equivalent this server can check",
	"$recursiveRef": "uses $recursiveRef, which has no equivalent this server can check",
	"$vocabulary":   "declares a $vocabulary; custom vocabularies cannot be checked here",
	"maxContains":   "uses maxContains, which this server cannot check",
}

// laterKeywords are keywords that 2019-09 introduced. A schema that declares draft-04, -06 or -07
// and uses one is refused: a validator of its declared draft ignores the keyword, while its author
// evidently meant it to apply, so either reading could be the wrong one.
var laterKeywords = map[string]bool{
	"prefixItems": true, "dependentRequired": true, "dependentSchemas": true,
	"unevaluatedProperties": true, "unevaluatedItems": true, "minContains": true, "maxContains": true,
	"$dynamicRef": true, "$recursiveRef": true,
}

// applicators are keywords whose subschemas may evaluate properties or items of the same
// instance; next to them, unevaluatedProperties and unevaluatedItems have no draft-7 equivalent.
var applicators = []string{"allOf", "anyOf", "oneOf", "if", "then", "else", "$ref", "dependentSchemas", "dependencies"}

// translator turns one page schema into draft 7 for gojsonschema. It keeps, for every subschema,
// where it came from and where it went, so that "$ref" pointers can be rewritten after keywords
// were renamed or moved. Only known keywords are copied: annotations and unknown keywords never
// reach gojsonschema, which keeps its own "id" handling and reference loading out of play.
type translator struct {
	dialect dialect
	paths   map[string]string // original JSON pointer -> translated JSON pointer
	nodes   map[string]any    // translated JSON pointer -> translated subschema
	refs    []refSite
}

// refSite is a translated subschema whose "$ref" still holds the page's reference.
type refSite struct {
	node map[string]any
	at   string // original pointer, for messages
}

func newTranslator(d dialect) *translator {
	return &translator{dialect: d, paths: map[string]string{}, nodes: map[string]any{}}
}

// translate translates a whole schema, root first, then rewrites references.
func (t *translator) translate(root map[string]any) (any, error) {
	out, err := t.walk(root, "", "", 0)
	if err != nil {
		return nil, err
	}
	for _, site := range t.refs {
		if err := t.rewriteRef(site); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *translator) walk(node any, orig, out string, depth int) (any, error) {
	if depth > MaxSchemaDepth {
		return nil, schemaRefusal(orig, fmt.Sprintf("subschemas nest deeper than %d levels", MaxSchemaDepth))
	}
	var result any
	switch v := node.(type) {
	case bool:
		result = v
	case map[string]any:
		m, err := t.object(v, orig, out, depth)
		if err != nil {
			return nil, err
		}
		result = m
	default:
		return nil, schemaRefusal(orig, fmt.Sprintf("a subschema is a JSON %s; it must be an object or a boolean", goKind(node)))
	}
	t.paths[orig] = out
	t.nodes[out] = result
	return result, nil
}

// object translates one schema object keyword by keyword, in a fixed order so that the first
// refusal is the same every time.
func (t *translator) object(m map[string]any, orig, out string, depth int) (map[string]any, error) {
	res := map[string]any{}
	_, hasRef := m["$ref"]
	refOnly := hasRef && !t.dialect.modern()
	deps := newDependencies()
	for _, k := range sortedKeys(m) {
		if t.dialect != dialectUnspecified && !t.dialect.modern() && laterKeywords[k] {
			return nil, schemaRefusal(orig, fmt.Sprintf("declares %s but uses %s, which that draft does not know and would ignore; declare 2020-12 in $schema (or drop $schema), or remove %s",
				t.dialect, k, k))
		}
		if refOnly && k != "definitions" && k != "$defs" {
			continue // before 2019-09, "$ref" replaces its siblings
		}
		if err := t.keyword(res, deps, m, k, orig, out, depth); err != nil {
			return nil, err
		}
	}
	if err := t.emitDependencies(res, deps, orig, out, depth); err != nil {
		return nil, err
	}
	if refOnly {
		return t.reference(res, m["$ref"], orig)
	}
	if err := t.unevaluated(res, m, orig, out, depth); err != nil {
		return nil, err
	}
	if hasRef {
		return t.reference(res, m["$ref"], orig)
	}
	return res, nil
}

func (t *translator) keyword(res map[string]any, deps *dependencies, m map[string]any, k, orig, out string, depth int) error {
	v := m[k]
	at := join(orig, k)
	switch {
	case (k == "const" || k == "enum") && !exactNumbers(v):
		return schemaRefusal(orig, "uses in "+k+" a number that this server can only compare rounded (beyond 2^53, or with more digits than a float64 holds), so a different number could match; list it as a string instead")
	case assertions[k]:
		res[k] = v
	case singles[k]:
		return t.single(res, k, k, v, orig, out, depth)
	case schemaMaps[k] != "":
		return t.schemaMap(res, schemaMaps[k], v, at, join(out, schemaMaps[k]), depth)
	case k == "allOf" || k == "anyOf" || k == "oneOf":
		return t.schemaList(res, k, v, at, join(out, k), depth)
	case k == "items", k == "prefixItems", k == "additionalItems":
		return t.items(res, m, k, orig, out, depth)
	case k == "dependencies", k == "dependentSchemas", k == "dependentRequired":
		return deps.collect(k, v, at)
	case k == "minContains":
		if n, ok := v.(json.Number); !ok || n.String() != "1" {
			return schemaRefusal(orig, "uses minContains other than 1, which this server cannot check")
		}
	case k == "$id" || (k == "id" && t.dialect == dialectDraft4):
		if orig != "" {
			return schemaRefusal(orig, "declares an embedded schema with "+k+"; keep every definition under $defs and refer to it with \"#/$defs/…\"")
		}
	case refused[k] != "":
		return schemaRefusal(orig, refused[k])
	}
	return nil // annotations and unknown keywords do not affect validation
}

func (t *translator) single(res map[string]any, key, to string, v any, orig, out string, depth int) error {
	s, err := t.walk(v, join(orig, key), join(out, to), depth+1)
	if err != nil {
		return err
	}
	res[to] = s
	return nil
}

func (t *translator) schemaMap(res map[string]any, to string, v any, orig, out string, depth int) error {
	m, ok := v.(map[string]any)
	if !ok {
		return schemaRefusal(orig, fmt.Sprintf("must map names to subschemas, but it is a JSON %s", goKind(v)))
	}
	dst, _ := res[to].(map[string]any)
	if dst == nil {
		dst = map[string]any{}
	}
	for _, name := range sortedKeys(m) {
		if _, dup := dst[name]; dup {
			return schemaRefusal(orig, fmt.Sprintf("defines %q in both $defs and definitions", name))
		}
		s, err := t.walk(m[name], join(orig, name), join(out, name), depth+1)
		if err != nil {
			return err
		}
		dst[name] = s
	}
	res[to] = dst
	return nil
}

func (t *translator) schemaList(res map[string]any, to string, v any, orig, out string, depth int) error {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return schemaRefusal(orig, "must be a non-empty array of subschemas")
	}
	dst := make([]any, len(list))
	for i, item := range list {
		s, err := t.walk(item, join(orig, strconv.Itoa(i)), join(out, strconv.Itoa(i)), depth+1)
		if err != nil {
			return err
		}
		dst[i] = s
	}
	res[to] = dst
	return nil
}

// items translates the three array keywords. In 2020-12, prefixItems is draft 7's array form of
// items and items after prefixItems is draft 7's additionalItems. The array form of items and
// additionalItems are draft-7 keywords: read as such unless the schema declares 2020-12, where
// they do not exist and a 2020-12 validator would ignore them.
func (t *translator) items(res map[string]any, m map[string]any, k, orig, out string, depth int) error {
	_, prefixed := m["prefixItems"]
	at := join(orig, k)
	switch {
	case k == "prefixItems":
		return t.schemaList(res, "items", m[k], at, join(out, "items"), depth)
	case k == "additionalItems" && (prefixed || t.dialect == dialect2020):
		return schemaRefusal(orig, "uses additionalItems, which 2020-12 replaced by items after prefixItems")
	case k == "additionalItems":
		return t.single(res, k, k, m[k], orig, out, depth)
	case prefixed:
		return t.single(res, k, "additionalItems", m[k], orig, out, depth)
	}
	if _, tuple := m[k].([]any); !tuple {
		return t.single(res, k, k, m[k], orig, out, depth)
	}
	if t.dialect == dialect2020 {
		return schemaRefusal(orig, "uses an array for items, which 2020-12 spells prefixItems")
	}
	return t.schemaList(res, k, m[k], at, join(out, k), depth)
}

// reference applies "$ref". From 2019-09 on, its siblings apply too, which gojsonschema would
// ignore, so "$ref" moves into allOf beside them. The reference itself is rewritten later, once
// every subschema's new place is known.
func (t *translator) reference(res map[string]any, ref any, orig string) (map[string]any, error) {
	if _, ok := ref.(string); !ok {
		return nil, schemaRefusal(orig, "has a $ref that is not a string")
	}
	node := map[string]any{"$ref": ref}
	t.refs = append(t.refs, refSite{node: node, at: orig})
	if !hasAssertions(res) {
		res["$ref"] = ref
		t.refs[len(t.refs)-1].node = res
		return res, nil
	}
	all, _ := res["allOf"].([]any)
	res["allOf"] = append(all, node)
	return res, nil
}

func hasAssertions(res map[string]any) bool {
	for k := range res {
		if k != "definitions" {
			return true
		}
	}
	return false
}

// rewriteRef points a reference at the translated subschema. Only references inside the schema
// are followed: the server never fetches a schema, and anchors ("#name") are not supported.
func (t *translator) rewriteRef(site refSite) error {
	ref := site.node["$ref"].(string)
	if !strings.HasPrefix(ref, "#") {
		return schemaRefusal(site.at, fmt.Sprintf("refers to %q outside the schema; the server never fetches schemas, so keep every definition under $defs", clip(ref, 80)))
	}
	ptr, err := url.PathUnescape(ref[1:])
	if err != nil || (ptr != "" && !strings.HasPrefix(ptr, "/")) {
		return schemaRefusal(site.at, fmt.Sprintf("$ref %q is not a JSON pointer; use a reference such as \"#/$defs/name\" (anchors are not supported)", clip(ref, 80)))
	}
	target, ok := t.paths[ptr]
	if !ok {
		return schemaRefusal(site.at, fmt.Sprintf("$ref %q does not point to a subschema; keep shared subschemas under $defs", clip(ref, 80)))
	}
	site.node["$ref"] = "#" + (&url.URL{Fragment: target}).EscapedFragment()
	return nil
}

// unevaluated translates unevaluatedProperties and unevaluatedItems where they provably mean
// additionalProperties, items or additionalItems: when no other subschema can evaluate the same
// instance. Anything else is refused rather than ignored, as gojsonschema would.
func (t *translator) unevaluated(res, m map[string]any, orig, out string, depth int) error {
	if err := t.unevaluatedProperties(res, m, orig, out, depth); err != nil {
		return err
	}
	return t.unevaluatedItems(res, m, orig, out, depth)
}

func (t *translator) unevaluatedProperties(res, m map[string]any, orig, out string, depth int) error {
	v, ok := m["unevaluatedProperties"]
	if !ok || v == true {
		return nil
	}
	if k := applicatorIn(m); k != "" {
		return schemaRefusal(orig, "uses unevaluatedProperties together with "+k+"; use additionalProperties in each subschema instead")
	}
	if _, ok := res["additionalProperties"]; ok {
		return nil // every property is already evaluated by additionalProperties
	}
	return t.single(res, "unevaluatedProperties", "additionalProperties", v, orig, out, depth)
}

func (t *translator) unevaluatedItems(res, m map[string]any, orig, out string, depth int) error {
	v, ok := m["unevaluatedItems"]
	if !ok || v == true {
		return nil
	}
	k := applicatorIn(m)
	if _, ok := m["contains"]; ok && k == "" {
		k = "contains"
	}
	if k != "" {
		return schemaRefusal(orig, "uses unevaluatedItems together with "+k+"; use items after prefixItems instead")
	}
	_, rest := res["additionalItems"]
	items, hasItems := res["items"]
	_, tuple := items.([]any)
	switch {
	case rest || (hasItems && !tuple):
		return nil // every item is already evaluated
	case tuple:
		return t.single(res, "unevaluatedItems", "additionalItems", v, orig, out, depth)
	}
	return t.single(res, "unevaluatedItems", "items", v, orig, out, depth)
}

func applicatorIn(m map[string]any) string {
	for _, k := range applicators {
		if _, ok := m[k]; ok && !(k == "dependencies" && onlyNames(m[k])) {
			return k
		}
	}
	return ""
}

// onlyNames reports draft-7 dependencies that only require names: those evaluate no property.
func onlyNames(v any) bool {
	m, _ := v.(map[string]any)
	for _, d := range m {
		if _, ok := d.([]any); !ok {
			return false
		}
	}
	return true
}

// dependencies gathers dependencies, dependentRequired and dependentSchemas, which draft 7 spells
// as one keyword; a name used by more than one becomes an allOf of all its parts.
type dependencies struct {
	parts map[string][]dependency
}

type dependency struct {
	names  []any // required property names, or nil for a schema
	schema any
	orig   string
}

func newDependencies() *dependencies {
	return &dependencies{parts: map[string][]dependency{}}
}

func (d *dependencies) collect(k string, v any, orig string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return schemaRefusal(orig, "must be an object")
	}
	for _, name := range sortedKeys(m) {
		part, err := newDependency(k, m[name], join(orig, name))
		if err != nil {
			return err
		}
		d.parts[name] = append(d.parts[name], part)
	}
	return nil
}

func newDependency(k string, v any, orig string) (dependency, error) {
	names, isList := v.([]any)
	if k == "dependentSchemas" || (k == "dependencies" && !isList) {
		return dependency{schema: v, orig: orig}, nil
	}
	if !isList {
		return dependency{}, schemaRefusal(orig, "must be an array of property names")
	}
	for _, n := range names {
		if _, ok := n.(string); !ok {
			return dependency{}, schemaRefusal(orig, "must be an array of property names")
		}
	}
	return dependency{names: names, orig: orig}, nil
}

func (t *translator) emitDependencies(res map[string]any, d *dependencies, orig, out string, depth int) error {
	if len(d.parts) == 0 {
		return nil
	}
	dst := map[string]any{}
	for _, name := range sortedKeys(d.parts) {
		v, err := t.dependency(d.parts[name], join(join(out, "dependencies"), name), depth)
		if err != nil {
			return err
		}
		dst[name] = v
	}
	res["dependencies"] = dst
	return nil
}

func (t *translator) dependency(parts []dependency, out string, depth int) (any, error) {
	if len(parts) == 1 {
		return t.dependencyPart(parts[0], out, depth, false)
	}
	all := make([]any, len(parts))
	for i, p := range parts {
		v, err := t.dependencyPart(p, join(join(out, "allOf"), strconv.Itoa(i)), depth, true)
		if err != nil {
			return nil, err
		}
		all[i] = v
	}
	return map[string]any{"allOf": all}, nil
}

func (t *translator) dependencyPart(p dependency, out string, depth int, asSchema bool) (any, error) {
	switch {
	case p.names == nil:
		return t.walk(p.schema, p.orig, out, depth+1)
	case asSchema:
		return map[string]any{"required": p.names}, nil
	}
	return p.names, nil
}

// join appends one reference token to a JSON pointer, escaped as RFC 6901 requires.
func join(ptr, token string) string {
	token = strings.ReplaceAll(token, "~", "~0")
	return ptr + "/" + strings.ReplaceAll(token, "/", "~1")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// goKind names the JSON type of a decoded value.
func goKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}

// schemaRefusal says what is wrong with the schema and where, as a JSON pointer into the page's
// own schema so the site's author can find it.
func schemaRefusal(at, what string) *Refusal {
	where := "the input schema"
	if at != "" {
		where = fmt.Sprintf("the input schema at %q", at)
	}
	return &Refusal{Kind: ErrUnsupportedSchema, Reason: where + " " + what}
}

// exactNumbers reports whether every number in v survives a float64 unchanged: gojsonschema
// compares const and enum values as float64, so 9007199254740993 would equal 9007199254740992.
func exactNumbers(v any) bool {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil {
			return false
		}
		want, ok1 := new(big.Rat).SetString(x.String())
		got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return ok1 && ok2 && want.Cmp(got) == 0
	case []any:
		for _, e := range x {
			if !exactNumbers(e) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !exactNumbers(e) {
				return false
			}
		}
	}
	return true
}
