package sitetools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheckDescriptorAccepts(t *testing.T) {
	raw := `{"name":"search.docs","title":"Search","description":"Search the docs.\nReturns links.",
		"inputSchema":{ "type": "object", "properties": {"q": {"type": "string"}} },
		"annotations":{"readOnlyHint":true,"untrustedContentHint":false},"futureField":1}`
	d, err := CheckDescriptor([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := Descriptor{Name: "search.docs", Title: "Search", Description: "Search the docs.\nReturns links.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Annotations: Annotations{ReadOnlyHint: true}, Kind: KindImperative, Autosubmit: true}
	if fmt.Sprint(d) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", d, want)
	}
	if _, err := d.Schema(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDescriptorKinds: a form tool says so, carries no annotations whatever is claimed for
// it, and is never read-only; consequentialHint makes any tool ask.
func TestCheckDescriptorKinds(t *testing.T) {
	for _, tc := range []struct {
		raw                 string
		kind                string
		readOnly, needsUser bool
		ann                 Annotations
	}{
		{`{"name":"a","description":"","annotations":{"readOnlyHint":true}}`, KindImperative, true, false, Annotations{ReadOnlyHint: true}},
		{`{"name":"a","description":"","kind":"imperative","annotations":{"readOnlyHint":true,"consequentialHint":true,"untrustedContentHint":true}}`, KindImperative, false, false, Annotations{ReadOnlyHint: true, ConsequentialHint: true, UntrustedContentHint: true}},
		{`{"name":"a","description":"","kind":"declarative","autosubmit":true,"annotations":{"readOnlyHint":true}}`, KindDeclarative, false, false, Annotations{}},
		{`{"name":"a","description":"","kind":"declarative"}`, KindDeclarative, false, true, Annotations{}},
	} {
		d, err := CheckDescriptor([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		if d.Kind != tc.kind || d.ReadOnly() != tc.readOnly || d.NeedsPerson() != tc.needsUser || d.Annotations != tc.ann {
			t.Fatalf("%s: got %+v (read-only %v, needs the person %v)", tc.raw, d, d.ReadOnly(), d.NeedsPerson())
		}
	}
	for raw, want := range map[string]string{
		`{"name":"a","description":"","kind":"magic"}`:                             `kind "magic" is neither`,
		`{"name":"a","description":"","kind":1}`:                                   `kind is a JSON number`,
		`{"name":"a","description":"","kind":"declarative","autosubmit":"yes"}`:    `autosubmit is a JSON string`,
		`{"name":"a","description":"","annotations":{"consequentialHint":"true"}}`: `consequentialHint is a JSON string`,
	} {
		if _, err := CheckDescriptor([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: got %v, want %q", raw, err, want)
		}
	}
}

func TestCheckDescriptorDefaults(t *testing.T) {
	for _, raw := range []string{
		`{"name":"ping","description":""}`,
		`{"name":"ping","description":"","inputSchema":null,"annotations":null,"title":null}`,
		`{"name":"ping","description":"","annotations":{"readOnlyHint":null}}`,
	} {
		d, err := CheckDescriptor([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if string(d.InputSchema) != `{"type":"object"}` || d.Annotations.ReadOnlyHint || d.Title != "" {
			t.Fatalf("%s: got %+v", raw, d)
		}
	}
}

func TestCheckDescriptorRefuses(t *testing.T) {
	long := strings.Repeat("x", 129)
	for _, tc := range []struct {
		raw, reason string
		kind        error
	}{
		{`[]`, "the tool descriptor is not a JSON object", ErrBadDescriptor},
		{`null`, "the tool descriptor is not a JSON object", ErrBadDescriptor},
		{`{"description":"d"}`, "the tool has no name, or its name is not a string", ErrBadDescriptor},
		{`{"name":7,"description":"d"}`, "the tool has no name, or its name is not a string", ErrBadDescriptor},
		{`{"name":"a b","description":"d"}`, `the tool name "a b" is not allowed; use 1 to 128 letters, digits, '_', '.' or '-'`, ErrBadDescriptor},
		{`{"name":"","description":"d"}`, `the tool name "" is not allowed`, ErrBadDescriptor},
		{`{"name":"` + long + `","description":"d"}`, "is not allowed", ErrBadDescriptor},
		{`{"name":"t"}`, `tool "t": the tool has no description`, ErrBadDescriptor},
		{`{"name":"t","description":["d"]}`, `tool "t": the tool's description is not a string`, ErrBadDescriptor},
		{`{"name":"t","description":"d","title":5}`, `tool "t": the tool's title is not a string`, ErrBadDescriptor},
		{`{"name":"t","description":"d","title":"a\u0007b"}`, `the tool's title contains control characters`, ErrBadDescriptor},
		{`{"name":"t","description":"` + strings.Repeat("d", MaxDescriptionBytes+1) + `"}`, "the tool's description is 8193 bytes; the limit is 8192", ErrBadDescriptor},
		{`{"name":"t","description":"d","title":"` + strings.Repeat("t", MaxTitleBytes+1) + `"}`, "the tool's title is 257 bytes; the limit is 256", ErrBadDescriptor},
		{`{"name":"t","description":"d","inputSchema":"{}"}`, `tool "t": the tool's inputSchema is a JSON string; it must be a JSON Schema object`, ErrBadDescriptor},
		{`{"name":"t","description":"d","inputSchema":true}`, `the tool's inputSchema is a JSON boolean`, ErrBadDescriptor},
		{`{"name":"t","description":"d","annotations":[]}`, `the tool's annotations are not a JSON object`, ErrBadDescriptor},
		{`{"name":"t","description":"d","annotations":{"readOnlyHint":"true"}}`, `tool "t": the tool's readOnlyHint is a JSON string; it must be true or false`, ErrBadDescriptor},
		{`{"name":"t","description":"d","annotations":{"untrustedContentHint":1}}`, `the tool's untrustedContentHint is a JSON number`, ErrBadDescriptor},
		{`{"name":"t","description":"d","inputSchema":{"type":"string"}}`, `tool "t": the input schema does not allow an object`, ErrUnsupportedSchema},
		{`{"name":"t","description":"d","inputSchema":{"$dynamicRef":"#x"}}`, `tool "t": the input schema uses $dynamicRef`, ErrUnsupportedSchema},
		{`{"name":"t","description":"` + strings.Repeat("d", MaxDescriptorBytes) + `"}`, "the tool descriptor is 65565 bytes; the limit is 65536", ErrBadDescriptor},
	} {
		_, err := CheckDescriptor([]byte(tc.raw))
		var r *Refusal
		if !errors.As(err, &r) || !errors.Is(err, tc.kind) {
			t.Errorf("%.60s: got %v, want a refusal of kind %v", tc.raw, err, tc.kind)
			continue
		}
		if !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%.60s:\ngot  %s\nwant %s", tc.raw, err, tc.reason)
		}
	}
}

func TestParseDescriptorsKeepsGoodTools(t *testing.T) {
	raw := `[{"name":"a","description":"A"},{"name":"b","description":"B","inputSchema":{"$recursiveRef":"#"}},{"name":"c","description":"C","annotations":{"readOnlyHint":true}}]`
	tools, refused, err := ParseDescriptors([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "a" || tools[1].Name != "c" || !tools[1].Annotations.ReadOnlyHint {
		t.Fatalf("tools: %+v", tools)
	}
	if len(refused) != 1 || refused[0].Tool != "b" || !errors.Is(refused[0], ErrUnsupportedSchema) {
		t.Fatalf("refused: %v", refused)
	}
}

func TestParseDescriptorsRefusesAnnouncement(t *testing.T) {
	var many []string
	for i := range MaxToolsPerSite + 1 {
		many = append(many, fmt.Sprintf(`{"name":"t%d","description":""}`, i))
	}
	for _, tc := range []struct{ raw, reason string }{
		{`{"name":"a"}`, "the list of tools is not a JSON array"},
		{`null`, "the list of tools is not a JSON array"},
		{`[{"name":"a","description":""},{"name":"a","description":"again"}]`, `the list of tools names "a" twice`},
		{"[" + strings.Join(many, ",") + "]", "the site offers 129 tools; the limit is 128"},
		{"[" + strings.Repeat(" ", MaxAnnouncementBytes) + "]", "the list of tools is 1048578 bytes; the limit is 1048576"},
	} {
		tools, refused, err := ParseDescriptors([]byte(tc.raw))
		if !errors.Is(err, ErrBadAnnouncement) || tools != nil || refused != nil {
			t.Errorf("%.40s: got %v %v %v", tc.raw, tools, refused, err)
			continue
		}
		if err.Error() != tc.reason {
			t.Errorf("%.40s: got %q, want %q", tc.raw, err, tc.reason)
		}
	}
}
