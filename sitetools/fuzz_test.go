package sitetools

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// schemaSeeds cover every translated and refused keyword, so the fuzzer starts from the edges.
var schemaSeeds = []string{
	`{}`,
	`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`,
	`{"properties":{"t":{"prefixItems":[{"type":"string"}],"items":false,"unevaluatedItems":false}}}`,
	`{"$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a","minLength":1}}}`,
	`{"dependentRequired":{"a":["b"]},"dependentSchemas":{"a":{"required":["c"]}},"unevaluatedProperties":false}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"minimum":0,"exclusiveMinimum":true}}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","if":{"required":["a"]},"then":{"required":["b"]},"else":false}`,
	`{"$defs":{"n":{"properties":{"k":{"items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`,
	`{"allOf":[{"$ref":"#"}]}`,
	`{"$dynamicRef":"#x","$anchor":"x","$id":"http://x/","contains":{},"maxContains":1}`,
	`{"patternProperties":{"^a":{"propertyNames":{"pattern":"b"}}},"additionalProperties":{"oneOf":[true,false]}}`,
}

func FuzzCompileSchema(f *testing.F) {
	for _, s := range schemaSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := compileSchema(raw)
		if err != nil {
			var r *Refusal
			if !errors.As(err, &r) || !errors.Is(err, ErrUnsupportedSchema) || r.Reason == "" {
				t.Fatalf("not a refusal: %#v", err)
			}
			return
		}
		if k := modernKeyword(s.translated); k != "" && !propertyNamed(raw, k) {
			t.Fatalf("%q survived translation: %s", k, mustJSON(s.translated))
		}
		for _, args := range []string{`{}`, `{"a":[1,"b",{"c":null}],"b":2.5,"q":"x"}`} {
			s.Validate(json.RawMessage(args))
		}
	})
}

// propertyNamed reports that the page's schema itself spells k, as a property name for example;
// modernKeyword cannot tell a property named "$defs" from the keyword.
func propertyNamed(raw []byte, k string) bool {
	quoted, _ := json.Marshal(k)
	return bytes.Contains(raw, quoted)
}

func FuzzParseDescriptors(f *testing.F) {
	f.Add([]byte(`[{"name":"a","description":"A","annotations":{"readOnlyHint":true}}]`))
	f.Add([]byte(`[{"name":"a","description":""},{"name":"a","description":""}]`))
	f.Add([]byte(`[{"name":"b.c-d_e","title":"T","description":"D","inputSchema":{"prefixItems":[{}]}}]`))
	f.Add([]byte(`[{"name":7},null,[],{"name":"x","description":"d","inputSchema":[]}]`))
	f.Add([]byte(`[{"name":"f","description":"F","kind":"declarative","autosubmit":true,"annotations":{"readOnlyHint":true}},{"name":"g","description":"","kind":"magic"}]`))
	f.Add([]byte(`[{"name":"c","description":"C","kind":"imperative","annotations":{"readOnlyHint":true,"consequentialHint":true,"untrustedContentHint":1}}]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tools, refused, err := ParseDescriptors(raw)
		if err != nil {
			if !errors.Is(err, ErrBadAnnouncement) || tools != nil || refused != nil {
				t.Fatalf("announcement refusal %v came with %v %v", err, tools, refused)
			}
			return
		}
		for _, d := range tools {
			if !toolName.MatchString(d.Name) {
				t.Fatalf("accepted name %q", d.Name)
			}
			if _, err := d.Schema(); err != nil {
				t.Fatalf("accepted tool %q with a schema that does not compile: %v", d.Name, err)
			}
			// A form or a consequential tool never runs without asking.
			if d.ReadOnly() && (d.Kind != KindImperative || d.Annotations.ConsequentialHint) {
				t.Fatalf("accepted tool %q as read-only: %+v", d.Name, d)
			}
			if d.Kind == KindDeclarative && d.Annotations != (Annotations{}) {
				t.Fatalf("accepted form %q with annotations %+v", d.Name, d.Annotations)
			}
		}
		for _, r := range refused {
			if r.Reason == "" {
				t.Fatal("refusal without a reason")
			}
		}
	})
}

func FuzzValidate(f *testing.F) {
	var compiled []*Schema
	for _, raw := range append([]string{issueSchema}, schemaSeeds...) {
		if s, err := CompileSchema(json.RawMessage(raw)); err == nil {
			compiled = append(compiled, s)
		}
	}
	f.Add([]byte(`{"title":"abc","items":[{"title":4}],"odd key":null}`))
	f.Add([]byte(`{"t":["a",1,2],"x":"","a":1,"b":{"k":[{"k":[]}]}}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"a":`))
	f.Fuzz(func(t *testing.T, args []byte) {
		for _, s := range compiled {
			for _, v := range s.Validate(json.RawMessage(args)) {
				if v.Message == "" || len(v.Path) < len("arguments") || v.Path[:len("arguments")] != "arguments" {
					t.Fatalf("bad violation %#v", v)
				}
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	s, err := CompileSchema(json.RawMessage(issueSchema))
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"title":"Fix the login bug","count":3,"state":"open","labels":["bug","auth"],"items":[{"title":"a"},{"title":"b"}],"owner":{"id":7}}`)
	b.ReportAllocs()
	for b.Loop() {
		if v := s.Validate(args); len(v) != 0 {
			b.Fatal(v)
		}
	}
}

func BenchmarkCompileSchemaCached(b *testing.B) {
	raw := json.RawMessage(issueSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CompileSchema(raw); err != nil {
			b.Fatal(err)
		}
	}
}
