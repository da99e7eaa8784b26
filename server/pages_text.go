package server

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Text that an agent or a page wrote (arguments, task titles, a tool's
// title and description) is shown so that what the person reads is what
// the text holds: a character that is invisible or reorders the text around
// it — bidirectional overrides and isolates, zero-width spaces and joiners
// of words, tag characters, line separators, control characters — could
// make a card read differently from the call it approves ("pay
// alice@example.com" written backwards behind a right-to-left override).
// Each such character is shown by name of its code point instead.

// hiddenRune reports whether r would be invisible or move text around it.
// The zero-width joiner and non-joiner are kept (emoji sequences and
// several scripts need them), and so are newlines and tabs.
func hiddenRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t' || r == '\u200c' || r == '\u200d':
		return false
	case r == '\u2028' || r == '\u2029' || r == '\u115f' || r == '\u1160' || r == '\u3164' || r == '\uffa0':
		return true // line and paragraph separators; the Hangul fillers, which draw nothing
	}
	return unicode.In(r, unicode.Cf, unicode.Cc) || unicode.In(r, unicode.Variation_Selector) && r >= 0xe0100
}

// shown is text with each hidden character as ⟨U+XXXX⟩.
func shown(s string) string {
	if strings.IndexFunc(s, hiddenRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if hiddenRune(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// shownJSON is JSON text with each hidden character inside its strings
// escaped as \uXXXX (a surrogate pair above the BMP): the same JSON value,
// visible. (Outside strings JSON allows only whitespace, which is kept.)
func shownJSON(s string) string {
	if strings.IndexFunc(s, hiddenRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !hiddenRune(r) || r == '\r':
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// blankRun is three or more line breaks with nothing but spaces and tabs
// between them.
var blankRun = regexp.MustCompile(`\n(?:[ \t]*\n){2,}`)

// shownValue is an argument's value as shown: hidden characters by name
// (shown), and every run of more than two line breaks said in words
// ("⟨60 line breaks⟩") on a line of its own. The value sits in a box that
// scrolls; blank lines would leave what follows them out of sight below a
// field that looks whole ("tea", then sixty empty lines, then the rest).
// The raw JSON beside it keeps every "\n".
func shownValue(s string) string {
	return blankRun.ReplaceAllStringFunc(shown(s), func(run string) string {
		return fmt.Sprintf("\n⟨%d line breaks⟩\n", strings.Count(run, "\n"))
	})
}
