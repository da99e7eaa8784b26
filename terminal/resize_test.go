package terminal

import (
	"math/rand/v2"
	"testing"
)

// splitWide reports whether a screen holds the second half of a wide
// character without its first (ICH splits one so, as in xterm.js): a
// redraw shows that cell as a blank.
func splitWide(m *term) bool {
	for _, b := range []*buffer{m.normal, m.alt} {
		if b.n == 0 {
			continue
		}
		for y := range m.rows {
			l := b.row(y)
			for x, c := range l.cells {
				if c.width == 0 && c.r == 0 && !c.comb && (x == 0 || l.cells[x-1].width != 2) {
					return true
				}
			}
		}
	}
	return false
}

// TestResizeThenRedrawGenerated resizes the screen model twice in the
// middle of generated streams (sizes from 2×1 to 41×15) and checks that
// nothing panics and the redraw reproduces what it holds. xterm.js reflows
// on resize and the model does not, so this compares the model with itself
// (docs/DECISIONS.md).
func TestResizeThenRedrawGenerated(t *testing.T) {
	streams := generate(7, 2000, allTokens, 20, 6)
	r := rand.New(rand.NewPCG(1, 2))
	skipped := 0
	for _, s := range streams {
		m := newTerm(20, 6)
		half := len(s) / 2
		m.write(s[:half])
		m.resize(2+r.IntN(40), 1+r.IntN(15))
		m.write(s[half:])
		m.resize(2+r.IntN(40), 1+r.IntN(15))
		m.write(s)
		if splitWide(m) {
			skipped++
			continue
		}
		checkRedraw(t, m)
	}
	if skipped > len(streams)/100 {
		t.Errorf("%d of %d streams split a wide character: the generator no longer tests the redraw", skipped, len(streams))
	}
}
