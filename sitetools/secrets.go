package sitetools

import (
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Secrets in what the page tells the agent (docs/DECISIONS.md, "Secrets in a page's path and
// title"). Sites put capability tokens in the path too — /invite/<token>, /reset/<token>,
// /s/<share key>, a magic sign-in link — and the path names the page, so it is kept, with each
// segment that looks like such a token replaced by hiddenSegment. A token is told from a name
// by its characters: a run of 16 or more letters and digits mixed (hex, base32, base64), or of
// upper and lower case mixed the way random text is (a quarter of its letters or more in each
// case, where CamelCase words have one capital each), or a UUID. Words, slugs
// (how-to-brew-tea-2024), numbers and short ids are kept. What it misses is a token that reads
// like words; what it hides by mistake is an id the agent did not need to pick a site.

// hiddenSegment stands for a hidden path segment or word: a placeholder as URI templates write
// one, plainly no real segment.
const hiddenSegment = "{hidden}"

// maxAgentTitle is the most of a page's title an agent is told, in characters: enough to tell
// tabs apart, too little to carry a page of instructions.
const maxAgentTitle = 120

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// tokenSeparator splits a segment into the pieces a slug or an encoded token is made of.
func tokenSeparator(r rune) bool { return strings.ContainsRune("-_.~+=,;:!/", r) }

// SecretLike reports whether a path segment or a word (already decoded) looks like a secret token.
func SecretLike(s string) bool {
	if uuidPattern.MatchString(s) {
		return true
	}
	pieces := strings.FieldsFunc(s, tokenSeparator)
	mixedChars, all := 0, 0
	for _, p := range pieces {
		if len(p) >= 16 && randomLooking(p) {
			return true
		}
		all += len(p)
		if len(p) >= 4 && randomLooking(p) {
			mixedChars += len(p)
		}
	}
	// base64url splits a token at - and _: most of it in mixed pieces, where a slug has words.
	return all >= 20 && 2*mixedChars >= all
}

// randomLooking reports whether a run of characters mixes kinds the way random text does:
// letters and digits, or both cases in fair measure. Anything but ASCII letters and digits is
// not a token's alphabet.
func randomLooking(p string) bool {
	var letters, digits, upper, lower int
	for _, r := range p {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r >= 'a' && r <= 'z':
			letters++
			lower++
		case r >= 'A' && r <= 'Z':
			letters++
			upper++
		default:
			return false
		}
	}
	return (letters > 0 && digits > 0) || (4*upper >= letters && 4*lower >= letters && upper > 1 && lower > 1)
}

// agentPath is a URL path with each segment that looks like a secret replaced by hiddenSegment,
// escaped as in an address.
func agentPath(u *url.URL) string {
	segs := strings.Split(u.EscapedPath(), "/")
	for i, seg := range segs {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			dec = seg
		}
		if SecretLike(dec) {
			segs[i] = hiddenSegment
		}
	}
	return strings.Join(segs, "/")
}

// AgentTitle is a page's title as an agent is told it: words that look like secret tokens
// hidden, characters that do not show (controls, format characters) dropped, and cut to
// maxAgentTitle characters. It is the page's own text, which the listing says.
func AgentTitle(title string) string {
	words := strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, title))
	for i, w := range words {
		if SecretLike(strings.Trim(w, `"'()[]<>,.;:!?`)) {
			words[i] = hiddenSegment
		}
	}
	t := strings.Join(words, " ")
	if utf8.RuneCountInString(t) > maxAgentTitle {
		t = string([]rune(t)[:maxAgentTitle-1]) + "…"
	}
	return t
}
