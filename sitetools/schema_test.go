package sitetools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// instance is one argument object and whether the schema's own (2020-12 unless declared)
// semantics accept it.
type instance struct {
	args string
	ok   bool
}

func TestTranslatedSchemasKeepTheirMeaning(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		instances    []instance
	}{
		{"prefixItems and items:false become items array and additionalItems:false",
			`{"properties":{"t":{"prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`,
			[]instance{{`{"t":["a",1]}`, true}, {`{"t":["a"]}`, true}, {`{"t":["a",1,2]}`, false}, {`{"t":[1,"a"]}`, false}}},
		{"items after prefixItems becomes additionalItems",
			`{"properties":{"t":{"prefixItems":[{"type":"string"}],"items":{"type":"boolean"}}}}`,
			[]instance{{`{"t":["a",true,false]}`, true}, {`{"t":["a",1]}`, false}, {`{"t":[true]}`, false}}},
		{"prefixItems alone leaves further items free",
			`{"properties":{"t":{"prefixItems":[{"type":"string"}]}}}`,
			[]instance{{`{"t":["a",1,null]}`, true}, {`{"t":[1]}`, false}}},
		{"items:false alone means an empty array",
			`{"properties":{"t":{"items":false}}}`,
			[]instance{{`{"t":[]}`, true}, {`{"t":[1]}`, false}}},
		{"items:true after prefixItems allows more items",
			`{"properties":{"t":{"prefixItems":[{"const":1}],"items":true}}}`,
			[]instance{{`{"t":[1,"x",{}]}`, true}, {`{"t":[2]}`, false}}},
		{"$defs become definitions and $ref follows",
			`{"$defs":{"id":{"type":"string","pattern":"^[a-z]+$"}},"properties":{"a":{"$ref":"#/$defs/id"}}}`,
			[]instance{{`{"a":"abc"}`, true}, {`{"a":"ABC"}`, false}, {`{"a":1}`, false}}},
		{"$defs names that need escaping",
			`{"$defs":{"a b/c~d%":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a%20b~1c~0d%25"}}}`,
			[]instance{{`{"x":"s"}`, true}, {`{"x":3}`, false}}},
		{"$ref siblings apply from 2019-09 on",
			`{"$defs":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/s","minLength":3}}}`,
			[]instance{{`{"x":"abc"}`, true}, {`{"x":"ab"}`, false}, {`{"x":5}`, false}}},
		{"$ref siblings apply in declared 2020-12, beside an existing allOf",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/s","allOf":[{"maxLength":4}],"minLength":2}}}`,
			[]instance{{`{"x":"abc"}`, true}, {`{"x":"a"}`, false}, {`{"x":"abcde"}`, false}, {`{"x":5}`, false}}},
		{"$ref siblings are ignored in draft-07",
			`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/definitions/s","minLength":3}}}`,
			[]instance{{`{"x":"ab"}`, true}, {`{"x":5}`, false}}},
		{"a root $ref with $defs, as generators write it",
			`{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}`,
			[]instance{{`{"n":1}`, true}, {`{}`, false}, {`{"n":"1"}`, false}}},
		{"a $ref into a renamed place is rewritten",
			`{"properties":{"pair":{"prefixItems":[{"type":"string"},{"type":"integer"}]},"n":{"$ref":"#/properties/pair/prefixItems/1"}}}`,
			[]instance{{`{"n":2}`, true}, {`{"n":"2"}`, false}}},
		{"a recursive schema that descends is fine",
			`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"properties":{"tree":{"$ref":"#/$defs/node"}}}`,
			[]instance{{`{"tree":{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}}`, true}, {`{"tree":{"v":1,"kids":[{"v":"2"}]}}`, false}}},
		{"dependentRequired becomes dependencies with names",
			`{"dependentRequired":{"card":["cvv","expiry"]}}`,
			[]instance{{`{}`, true}, {`{"card":1,"cvv":2,"expiry":3}`, true}, {`{"card":1,"cvv":2}`, false}, {`{"cvv":2}`, true}}},
		{"dependentSchemas becomes dependencies with schemas",
			`{"dependentSchemas":{"card":{"properties":{"cvv":{"type":"string"}},"required":["cvv"]}}}`,
			[]instance{{`{"card":1,"cvv":"123"}`, true}, {`{"card":1}`, false}, {`{"card":1,"cvv":123}`, false}, {`{"cvv":123}`, true}}},
		{"dependentRequired and dependentSchemas on one name both apply",
			`{"dependentRequired":{"a":["b"]},"dependentSchemas":{"a":{"required":["c"]}}}`,
			[]instance{{`{"a":1,"b":1,"c":1}`, true}, {`{"a":1,"b":1}`, false}, {`{"a":1,"c":1}`, false}}},
		{"draft-7 dependencies still work",
			`{"dependencies":{"a":["b"],"c":{"required":["d"]}}}`,
			[]instance{{`{"a":1,"b":1,"c":1,"d":1}`, true}, {`{"a":1}`, false}, {`{"c":1}`, false}}},
		{"unevaluatedProperties:false with no applicator is additionalProperties:false",
			`{"properties":{"a":{}},"patternProperties":{"^x_":{}},"unevaluatedProperties":false}`,
			[]instance{{`{"a":1,"x_1":2}`, true}, {`{"b":1}`, false}}},
		{"unevaluatedProperties as a schema",
			`{"properties":{"a":{}},"unevaluatedProperties":{"type":"string"}}`,
			[]instance{{`{"a":1,"b":"s"}`, true}, {`{"b":1}`, false}}},
		{"unevaluatedProperties is moot after additionalProperties",
			`{"additionalProperties":{"type":"integer"},"unevaluatedProperties":false}`,
			[]instance{{`{"b":1}`, true}, {`{"b":"x"}`, false}}},
		{"unevaluatedProperties:true changes nothing, even beside allOf",
			`{"allOf":[{"properties":{"a":{"type":"integer"}}}],"unevaluatedProperties":true}`,
			[]instance{{`{"a":1,"b":2}`, true}, {`{"a":"1"}`, false}}},
		{"unevaluatedProperties beside a names-only dependency",
			`{"properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]},"unevaluatedProperties":false}`,
			[]instance{{`{"a":1,"b":2}`, true}, {`{"a":1}`, false}, {`{"c":1}`, false}}},
		{"unevaluatedItems:false after prefixItems",
			`{"properties":{"t":{"prefixItems":[{"type":"string"}],"unevaluatedItems":false}}}`,
			[]instance{{`{"t":["a"]}`, true}, {`{"t":["a","b"]}`, false}}},
		{"unevaluatedItems without items applies to every item",
			`{"properties":{"t":{"unevaluatedItems":{"type":"integer"}}}}`,
			[]instance{{`{"t":[1,2]}`, true}, {`{"t":[1,"2"]}`, false}}},
		{"unevaluatedItems is moot after items",
			`{"properties":{"t":{"items":{"type":"integer"},"unevaluatedItems":false}}}`,
			[]instance{{`{"t":[1,2]}`, true}, {`{"t":["x"]}`, false}}},
		{"$schema 2019-09 is read as draft 7",
			`{"$schema":"https://json-schema.org/draft/2019-09/schema","properties":{"n":{"type":"integer","exclusiveMinimum":0}},"dependentRequired":{"n":["m"]}}`,
			[]instance{{`{"n":1,"m":0}`, true}, {`{"n":0,"m":0}`, false}, {`{"n":1}`, false}}},
		{"draft-04 keeps boolean exclusiveMinimum",
			`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`,
			[]instance{{`{"n":1}`, true}, {`{"n":0}`, false}}},
		{"minContains:1 is the default",
			`{"properties":{"t":{"contains":{"const":"x"},"minContains":1}}}`,
			[]instance{{`{"t":["a","x"]}`, true}, {`{"t":["a"]}`, false}}},
		{"annotations and unknown keywords are ignored",
			`{"title":"T","description":"D","examples":[{"$ref":"http://x"}],"x-ui":{"id":"http://evil/"},"default":{"$id":"http://evil/"},"$comment":"c","properties":{"a":{"deprecated":true,"readOnly":true,"type":"string"}}}`,
			[]instance{{`{"a":"s"}`, true}, {`{"a":1}`, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := CompileSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range tc.instances {
				v := s.Validate(json.RawMessage(in.args))
				if (len(v) == 0) != in.ok {
					t.Errorf("%s: want ok=%v, got %v (translated: %s)", in.args, in.ok, v, mustJSON(s.translated))
				}
			}
		})
	}
}

// TestTranslationReachesEverySubschema puts 2020-12 keywords at every place a subschema can be
// and checks that none survives translation.
func TestTranslationReachesEverySubschema(t *testing.T) {
	inner := `{"prefixItems":[{"type":"string"}],"items":false,"$defs":{"d":{"dependentRequired":{"a":["b"]}}},"dependentSchemas":{"x":{"required":["y"]}}}`
	places := []string{
		`"properties":{"p":INNER}`, `"patternProperties":{"^p":INNER}`, `"additionalProperties":INNER`,
		`"allOf":[INNER]`, `"anyOf":[INNER]`, `"oneOf":[INNER]`, `"not":INNER`,
		`"if":INNER,"then":INNER,"else":INNER`, `"$defs":{"d":INNER}`, `"definitions":{"d":INNER}`,
		`"dependentSchemas":{"k":INNER}`, `"dependencies":{"k":INNER}`, `"contains":INNER`,
		`"propertyNames":INNER`, `"items":INNER`, `"prefixItems":[INNER]`, `"additionalItems":INNER`,
		`"unevaluatedProperties":INNER`, `"unevaluatedItems":INNER`,
	}
	for _, place := range places {
		raw := "{" + strings.ReplaceAll(place, "INNER", strings.ReplaceAll(inner, "INNER", "{}")) + "}"
		s, err := CompileSchema(json.RawMessage(raw))
		if err != nil {
			t.Errorf("%s: %v", place, err)
			continue
		}
		if k := modernKeyword(s.translated); k != "" {
			t.Errorf("%s: %q survived: %s", place, k, mustJSON(s.translated))
		}
	}
}

// modernKeyword finds a keyword gojsonschema would ignore or misread anywhere in a translated
// schema; a property literally named so would be a false alarm, which these tests avoid.
func modernKeyword(v any) string {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			switch k {
			case "prefixItems", "$defs", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
				"unevaluatedItems", "$schema", "$id", "id", "$anchor", "minContains":
				return k
			}
			if found := modernKeyword(c); found != "" {
				return found
			}
		}
	case []any:
		for _, c := range t {
			if found := modernKeyword(c); found != "" {
				return found
			}
		}
	}
	return ""
}

func TestRefusedSchemas(t *testing.T) {
	deep := strings.Repeat(`{"not":`, MaxSchemaDepth+1) + "{}" + strings.Repeat("}", MaxSchemaDepth+1)
	var blowup strings.Builder
	blowup.WriteString(`{"properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{`)
	for i := range 20 {
		fmt.Fprintf(&blowup, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	blowup.WriteString(`"d20":{"type":"string"}}}`)
	for _, tc := range []struct{ schema, reason string }{
		{`{"$dynamicRef":"#node"}`, `the input schema uses $dynamicRef, which has no equivalent this server can check`},
		{`{"properties":{"a":{"$recursiveRef":"#"}}}`, `the input schema at "/properties/a" uses $recursiveRef, which has no equivalent this server can check`},
		{`{"$vocabulary":{"https://json-schema.org/draft/2020-12/vocab/core":true}}`, `declares a $vocabulary`},
		{`{"properties":{"t":{"contains":{},"maxContains":2}}}`, `the input schema at "/properties/t" uses maxContains, which this server cannot check`},
		{`{"properties":{"t":{"contains":{},"minContains":2}}}`, `uses minContains other than 1, which this server cannot check`},
		{`{"$defs":{"a":{"$anchor":"a","type":"string"}},"properties":{"x":{"$ref":"#a"}}}`, `$ref "#a" is not a JSON pointer; use a reference such as "#/$defs/name" (anchors are not supported)`},
		{`{"properties":{"x":{"$ref":"https://example.com/schema.json"}}}`, `refers to "https://example.com/schema.json" outside the schema; the server never fetches schemas`},
		{`{"properties":{"x":{"$ref":"other.json#/a"}}}`, `refers to "other.json#/a" outside the schema`},
		{`{"properties":{"x":{"$ref":"#/properties"}}}`, `$ref "#/properties" does not point to a subschema`},
		{`{"properties":{"x":{"$ref":"#/$defs/missing"}}}`, `$ref "#/$defs/missing" does not point to a subschema`},
		{`{"properties":{"x":{"$ref":5}}}`, `has a $ref that is not a string`},
		{`{"properties":{"x":{"$id":"https://example.com/x","type":"string"}}}`, `the input schema at "/properties/x" declares an embedded schema with $id`},
		{`{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`, `the input schema uses unevaluatedProperties together with allOf; use additionalProperties in each subschema instead`},
		{`{"properties":{"t":{"$ref":"#/$defs/a","unevaluatedProperties":false}},"$defs":{"a":{}}}`, `uses unevaluatedProperties together with $ref`},
		{`{"properties":{"t":{"contains":{"type":"string"},"unevaluatedItems":false}}}`, `uses unevaluatedItems together with contains`},
		{`{"properties":{"t":{"anyOf":[{"prefixItems":[{}]}],"unevaluatedItems":false}}}`, `uses unevaluatedItems together with anyOf`},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"t":{"items":[{}]}}}`, `uses an array for items, which 2020-12 spells prefixItems`},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"t":{"additionalItems":false}}}`, `uses additionalItems, which 2020-12 replaced by items after prefixItems`},
		{`{"properties":{"t":{"prefixItems":[{}],"additionalItems":false}}}`, `uses additionalItems`},
		{`{"$schema":"https://example.com/my-dialect"}`, `$schema "https://example.com/my-dialect" is not a JSON Schema draft this server knows; use draft-07 or 2020-12`},
		{`{"$schema":7}`, `$schema must be a string`},
		{`{"properties":{"n":{"const":9007199254740993}}}`, `uses in const a number that this server can only compare rounded`},
		{`{"properties":{"n":{"enum":[1,{"a":[0.1000000000000000055]}]}}}`, `uses in enum a number`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"prefixItems":[{"type":"string"}],"items":{"type":"number"}}}}`,
			`the input schema at "/properties/a" declares draft-07 but uses prefixItems, which that draft does not know and would ignore; declare 2020-12`},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","dependentRequired":{"a":["b"]}}`, `declares draft-04 but uses dependentRequired`},
		{`{"$schema":"http://json-schema.org/draft-06/schema#","properties":{"t":{"unevaluatedProperties":false}}}`, `declares draft-06 but uses unevaluatedProperties`},
		{`[]`, `the input schema is a JSON array; it must be a JSON Schema object`},
		{`true`, `the input schema is a JSON boolean`},
		{`{"type":"array"}`, `the input schema does not allow an object, but tool arguments are always a JSON object`},
		{`{"type":"object"`, `the input schema is not valid JSON`},
		{`{"properties":{"a":[]}}`, `the input schema at "/properties/a" a subschema is a JSON array; it must be an object or a boolean`},
		{`{"allOf":{}}`, `the input schema at "/allOf" must be a non-empty array of subschemas`},
		{`{"dependentRequired":{"a":"b"}}`, `the input schema at "/dependentRequired/a" must be an array of property names`},
		{`{"$ref":"#"}`, `refers to itself without going deeper into the arguments, so checking a call would never end`},
		{`{"allOf":[{"$ref":"#"}]}`, `refers to itself without going deeper`},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `refers to itself without going deeper`},
		{blowup.String(), `is too complex to check: one argument could need more than 20000 checks`},
		{deep, `subschemas nest deeper than 64 levels`},
		{`{"properties":{"a":{"pattern":"(?=x)"}}}`, `the input schema is not a valid JSON Schema: `},
		{`{"properties":{"a":{"minLength":-1}}}`, `the input schema is not a valid JSON Schema: `},
	} {
		_, err := CompileSchema(json.RawMessage(tc.schema))
		if !errors.Is(err, ErrUnsupportedSchema) {
			t.Errorf("%.80s: got %v, want a refusal", tc.schema, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%.80s:\ngot  %s\nwant %s", tc.schema, err, tc.reason)
		}
	}
}

func TestNoRemoteReferenceIsEverLoaded(t *testing.T) {
	// Even a reference the translator let through must fail inside gojsonschema, not fetch.
	_, err := compileDraft(map[string]any{"$ref": "http://127.0.0.1:1/schema.json"}, dialectDraft7)
	if err == nil || !strings.Contains(err.Error(), "never fetched") {
		t.Fatalf("got %v", err)
	}
}

func TestSchemaCacheIsBoundedAndShared(t *testing.T) {
	c := newSchemaCache(100)
	a := json.RawMessage(`{"properties":{"a":{"type":"string"}}}`) // 39 bytes
	first, _ := c.get(a)
	again, _ := c.get(a)
	if first != again {
		t.Fatal("the same schema compiled twice")
	}
	c.get(json.RawMessage(`{"properties":{"b":{"type":"string"}}}`))
	c.get(json.RawMessage(`{"properties":{"c":{"type":"string"}}}`))
	if c.len() != 2 {
		t.Fatalf("cache holds %d schemas, want 2", c.len())
	}
	if third, _ := c.get(a); third == first {
		t.Fatal("the least recently used schema was not evicted")
	}
}

func TestCompileSchemaConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			raw := fmt.Sprintf(`{"properties":{"n":{"type":"integer","maximum":%d}}}`, i%2)
			s, err := CompileSchema(json.RawMessage(raw))
			if err != nil {
				t.Error(err)
				return
			}
			if v := s.Validate(json.RawMessage(`{"n":5}`)); len(v) != 1 {
				t.Errorf("got %v", v)
			}
		})
	}
	wg.Wait()
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGojsonschemaMisreadsModernSchemas pins the pitfall this package exists for: if gojsonschema
// ever learns 2020-12, these fail and the translation can shrink.
func TestGojsonschemaMisreadsModernSchemas(t *testing.T) {
	for _, tc := range []struct{ schema, args string }{
		{`{"properties":{"t":{"prefixItems":[{"type":"string"}],"items":false}}}`, `{"t":["a"]}`}, // valid, rejected
		{`{"dependentRequired":{"a":["b"]}}`, `{"a":1}`},                                          // invalid, accepted
		{`{"properties":{"a":{}},"unevaluatedProperties":false}`, `{"b":1}`},                      // invalid, accepted
	} {
		var doc any
		if err := json.Unmarshal([]byte(tc.schema), &doc); err != nil {
			t.Fatal(err)
		}
		raw, err := compileDraft(doc, dialectDraft7)
		if err != nil {
			t.Fatal(err)
		}
		translated, err := CompileSchema(json.RawMessage(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		args := json.RawMessage(tc.args)
		if (len(raw.Validate(args)) == 0) == (len(translated.Validate(args)) == 0) {
			t.Errorf("%s: gojsonschema now agrees with the translation", tc.schema)
		}
	}
}

func TestConstAndEnumNumbersAFloatHoldsAreKept(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"properties":{"n":{"enum":[0.1,1.5,-3,9007199254740992,1e300]},"c":{"const":{"v":[2.25]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v := s.Validate(json.RawMessage(`{"n":0.1,"c":{"v":[2.25]}}`)); len(v) != 0 {
		t.Fatalf("valid arguments refused: %v", v)
	}
	if v := s.Validate(json.RawMessage(`{"n":0.2}`)); len(v) == 0 {
		t.Fatal("a number outside the enum was accepted")
	}
}

func TestEmailAndIPv4FormatsAreStrict(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(`{"properties":{"e":{"format":"email"},"ip":{"format":"ipv4"},"n":{"format":"email"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for args, ok := range map[string]bool{
		`{"e":"bob@example.com"}`:       true,
		`{"e":"Bob <bob@example.com>"}`: false,
		`{"e":"<bob@example.com>"}`:     false,
		`{"e":"not an address"}`:        false,
		`{"ip":"192.168.0.1"}`:          true,
		`{"ip":"::ffff:1.2.3.4"}`:       false,
		`{"ip":"::1"}`:                  false,
		`{"n":5}`:                       true, // formats describe strings only
	} {
		if got := len(s.Validate(json.RawMessage(args))) == 0; got != ok {
			t.Errorf("%s: valid=%v, want %v", args, got, ok)
		}
	}
}
