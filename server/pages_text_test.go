package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestShownNamesHiddenCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"pay alice@example.com":                "pay alice@example.com",
		"pay \u202emoc.elpmaxe@ecila":          "pay ⟨U+202E⟩moc.elpmaxe@ecila",
		"a\u200bb\u2066c\u2069\u200e":          "a⟨U+200B⟩b⟨U+2066⟩c⟨U+2069⟩⟨U+200E⟩",
		"tag\U000E0041\U000E0042 vs\U000E0100": "tag⟨U+E0041⟩⟨U+E0042⟩ vs⟨U+E0100⟩",
		"line\u2028sep\x1b[31m\x00":            "line⟨U+2028⟩sep⟨U+001B⟩[31m⟨U+0000⟩",
		"two\nlines\tand 👨\u200d👩 ❤\ufe0f":     "two\nlines\tand 👨\u200d👩 ❤\ufe0f", // kept: layout, emoji joiners, emoji presentation
		"שלום עולם":                            "שלום עולם",
	} {
		if got := shown(in); got != want {
			t.Errorf("shown(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShownJSONIsTheSameValueVisible(t *testing.T) {
	in := "{\r\n  \"to\": \"alice@example.com\u202egnp.exe\",\n  \"note\": \"hi\u200bthere\U000E0041\",\n  \"n\": 1\n}"
	got := shownJSON(in)
	if strings.ContainsAny(got, "\u202e\u200b\U000E0041") {
		t.Fatalf("shownJSON left hidden characters: %q", got)
	}
	for _, want := range []string{`\u202e`, `\u200b`, `\udb40\udc41`} {
		if !strings.Contains(got, want) {
			t.Errorf("shownJSON(%q) = %q, want %s in it", in, got, want)
		}
	}
	var a, b any
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &b); err != nil {
		t.Fatalf("shownJSON made invalid JSON %q: %v", got, err)
	}
	if ja, _ := json.Marshal(a); string(ja) != func() string { jb, _ := json.Marshal(b); return string(jb) }() {
		t.Errorf("shownJSON changed the value: %v, want %v", b, a)
	}
}

// A page's own error, shown to the person on the audit and task pages,
// shows what it hides too.
func TestPersonErrorShowsHiddenCharacters(t *testing.T) {
	got := personError("failed", "The page failed: sent to \u202emoc.elpmaxe@ecila. Do not repeat the same call.")
	if want := "The page failed: sent to ⟨U+202E⟩moc.elpmaxe@ecila."; got != want {
		t.Fatalf("personError = %q, want %q", got, want)
	}
}
