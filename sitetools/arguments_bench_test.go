package sitetools

import (
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkReadArguments is what a call's arguments cost before the schema is applied: the text
// checks, the budget's measure and the decode with its duplicate and depth checks (Check without
// gojsonschema), for a small call and a 64 KiB one.
func BenchmarkReadArguments(b *testing.B) {
	s, err := CompileSchema(json.RawMessage(issueSchema))
	if err != nil {
		b.Fatal(err)
	}
	small := `{"title":"Fix the login bug","count":3,"state":"open","labels":["bug","auth"],"items":[{"title":"a"},{"title":"b"}],"owner":{"id":7}}`
	items := strings.Repeat(`{"title":"an item with a \"quoted\" word","n":12.5,"tags":["x","y"]},`, 700)
	large := `{"title":"t","items":[` + strings.TrimSuffix(items, ",") + `]}`
	for _, c := range []struct{ name, args string }{{"small", small}, {"64KiB", large}} {
		b.Run(c.name, func(b *testing.B) {
			args := json.RawMessage(c.args)
			b.SetBytes(int64(len(args)))
			b.ReportAllocs()
			for b.Loop() {
				if _, aerr := readArguments(s, args); aerr != nil {
					b.Fatal(aerr)
				}
			}
		})
	}
}

// readArguments is Check up to gojsonschema.
func readArguments(s *Schema, args json.RawMessage) (any, *ArgumentsError) {
	args, aerr := checkText(args)
	if aerr != nil {
		return nil, aerr
	}
	sh := measure(args)
	if aerr := s.withinBudget(args, sh); aerr != nil {
		return nil, aerr
	}
	return decodeValue(args, sh)
}

// BenchmarkArgumentPasses times the passes over the 64 KiB arguments one by one: measure (which
// now also counts the objects' members) and objectMembers, the pass it replaced.
func BenchmarkArgumentPasses(b *testing.B) {
	items := strings.Repeat(`{"title":"an item with a \"quoted\" word","n":12.5,"tags":["x","y"]},`, 700)
	args := []byte(`{"title":"t","items":[` + strings.TrimSuffix(items, ",") + `]}`)
	b.Run("measure", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		for b.Loop() {
			measure(args)
		}
	})
	b.Run("objectMembers", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		for b.Loop() {
			objectMembers(args)
		}
	})
}
