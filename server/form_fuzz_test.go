package server

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzFormFields: the web app's name fields (workspaces, tokens, browsers,
// machines) and the token form's expiry are a browser's form values, so any
// text. A name taken is trimmed, UTF-8, at most maxNameLen characters, has
// no control character and is taken again as itself; an expiry is one the
// form lists; each refusal names its field.
func FuzzFormFields(f *testing.F) {
	for _, s := range []string{"Alice's", "  padded  ", "", " ", "a\x00b", "tab\there", "\xff", strings.Repeat("é", maxNameLen+1), "0", "7", "365", "07", "-7", "1e2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		name, err := cleanName("name", v)
		if err != nil {
			if !strings.Contains(err.Error(), `"name"`) {
				t.Fatalf("cleanName(%q): %v does not name the field", v, err)
			}
		} else {
			if name == "" || name != strings.TrimSpace(name) || !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxNameLen || strings.IndexFunc(name, unicode.IsControl) >= 0 {
				t.Fatalf("cleanName(%q) took %q", v, name)
			}
			if again, err := cleanName("name", name); err != nil || again != name {
				t.Fatalf("cleanName(%q) = %q, taken again %q, %v", v, name, again, err)
			}
		}
		at, err := tokenExpiry(v)
		listed := v == ""
		for _, e := range tokenExpiries {
			listed = listed || v == strconv.Itoa(e.Days)
		}
		switch {
		case err != nil && listed, err == nil && !listed:
			t.Fatalf("tokenExpiry(%q) = %v, %v", v, at, err)
		case err != nil && !strings.Contains(err.Error(), "expires"):
			t.Fatalf("tokenExpiry(%q): %v does not say what to choose", v, err)
		case err == nil && (at == nil) != (v == "" || v == "0"):
			t.Fatalf("tokenExpiry(%q) = %v", v, at)
		}
	})
}
