package terminal

import (
	"math/rand/v2"
	"testing"
)

// TestResizeThenRedrawGenerated resizes the screen model twice in the
// middle of generated streams (sizes from 2×1 to 41×15) and checks that
// nothing panics and the redraw reproduces what it holds (in the model
// itself; xterm_resize_test.go compares with xterm.js).
func TestResizeThenRedrawGenerated(t *testing.T) {
	streams := generate(7, 2000, allTokens, 20, 6)
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range streams {
		m := newTerm(20, 6)
		half := len(s) / 2
		m.write(s[:half])
		m.resize(2+r.IntN(40), 1+r.IntN(15))
		m.write(s[half:])
		m.resize(2+r.IntN(40), 1+r.IntN(15))
		m.write(s)
		checkRedraw(t, m)
	}
}
