package sitetools

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// FuzzDecodeStoredTools: whatever a site row holds, what is read back is a
// list of tools an announcement's checks take, with distinct names, at most
// MaxToolsPerSite, each at an address on the site's origin or at the site's
// last address; and what persist would write of them reads back the same.
// A row that is not a list at all is an error naming the site.
func FuzzDecodeStoredTools(f *testing.F) {
	const origin, last = "https://shop.example", "https://shop.example/shop?q=1#top"
	for _, s := range []string{
		`[{"name":"search","description":"d","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"annotations":{"readOnlyHint":true},"kind":"imperative","autosubmit":true,"url":"https://shop.example/s"}]`,
		`[{"name":"order","description":"d","inputSchema":{},"annotations":{},"kind":"declarative","autosubmit":false,"url":"https://evil.example/"}]`,
		`[{"name":"a","description":"d","inputSchema":{}},{"name":"a","description":"e","inputSchema":{}}]`,
		`[{"name":"bad name","description":"d","inputSchema":{}}]`,
		`[{"name":"a","description":"d","inputSchema":{},"url":"https://user@shop.example/"}]`,
		`[{"name":"a","description":"d","inputSchema":{},"url":"javascript:alert(1)"}]`,
		`[]`, `null`, `{}`, `[1,"x",null]`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tools, err := decodeStoredTools(raw, origin, last)
		if err != nil {
			if !strings.Contains(err.Error(), origin) || !strings.Contains(err.Error(), "not a JSON array") {
				t.Fatalf("decodeStoredTools(%q): %v", raw, err)
			}
			return
		}
		if len(tools) > MaxToolsPerSite {
			t.Fatalf("decodeStoredTools(%q) read %d tools", raw, len(tools))
		}
		names := map[string]bool{}
		for _, d := range tools {
			b, _ := json.Marshal(d)
			checked, err := CheckDescriptor(b)
			if err != nil || checked.Name != d.Name || checked.Kind != d.Kind || checked.Autosubmit != d.Autosubmit || checked.Annotations != d.Annotations {
				t.Fatalf("decodeStoredTools(%q) read %+v, which the checks read as %+v, %v", raw, d, checked, err)
			}
			if names[d.Name] {
				t.Fatalf("decodeStoredTools(%q) read %q twice", raw, d.Name)
			}
			names[d.Name] = true
			u, err := url.Parse(d.URL)
			if d.URL != PageAddress(last) && (err != nil || u.Scheme+"://"+u.Host != origin || u.User != nil) {
				t.Fatalf("decodeStoredTools(%q) kept address %q off %s", raw, d.URL, origin)
			}
		}
		if raw == "" {
			return
		}
		b, err := json.Marshal(tools)
		if err != nil {
			t.Fatal(err)
		}
		// (compared as persist writes them: a schema's "&" is written \u0026, the same JSON)
		again, err := decodeStoredTools(string(b), origin, last)
		if b2, _ := json.Marshal(again); err != nil || !bytes.Equal(b2, b) {
			t.Fatalf("decodeStoredTools(%q) = %+v; written and read again: %+v, %v", raw, tools, again, err)
		}
	})
}
