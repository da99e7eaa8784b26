package terminal

import (
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// Cutter finds where output may be cut into batches: only where the escape
// parser is in its ground state, since a viewer that gets a redraw in place
// of pending batches must not be left inside half a sequence. It runs a
// second ansi.Parser (with the same 0x9C correction the emulator applies, so
// the two agree where strings end) and costs far less than the emulator.
//
// Pending wrap: after a character printed into the last column the cursor
// waits to wrap; the redraw reproduces that state (by writing the last cell
// again), but a cut where no wrap is pending is the simpler redraw. The cutter cannot see columns cheaply, so it reports a second,
// preferred offset: the last ground point right after an action that ends a
// pending wrap (CR, LF, VT, FF, BS, IND, RIS, or a CSI that moves the cursor
// or erases characters). Everything else is only a ground point.
//
// A Cutter is owned by one goroutine.
type Cutter struct {
	s *streamState
}

// NewCutter returns a Cutter for a stream that starts in ground state.
func NewCutter() *Cutter {
	return &Cutter{s: newStreamState()}
}

// Scan advances over p and returns offsets into p (the length of a prefix):
// clear, the last ground point after a pending-wrap-ending action, and
// ground, the last ground point at all; -1 when p has none.
func (c *Cutter) Scan(p []byte) (clear, ground int) {
	clear, ground = -1, -1
	for i := 0; i < len(p); i++ {
		b := p[i]
		before := c.s.p.State()
		if before == parser.GroundState && b >= 0x20 && b < 0x7f {
			// printable ASCII between sequences: every byte is a ground
			// point and none ends a pending wrap, so the run is skipped
			// without the parser (which would stay in ground).
			for i+1 < len(p) && p[i+1] >= 0x20 && p[i+1] < 0x7f {
				i++
			}
			c.s.u8len = 0 // as the emulator does (streamState.feed)
			ground = i + 1
			continue
		}
		var action parser.Action
		fed := false
		c.s.feed(b, func(_ byte, a parser.Action) { action, fed = a, true })
		if !fed || c.s.holding() || !c.s.ground() {
			continue
		}
		ground = i + 1
		if endsWrap(before, action, b) {
			clear = i + 1
		}
	}
	return clear, ground
}

// csiEndsWrap marks CSI finals after which no wrap is pending:
// cursor moves, DECSTBM (homes the cursor) and ECH/EL (erase characters).
var csiEndsWrap = [128]bool{
	'A': true, 'B': true, 'C': true, 'D': true, 'E': true, 'F': true, 'G': true,
	'H': true, 'f': true, 'd': true, 'e': true, '`': true, 'a': true, 'r': true,
	'X': true, 'K': true,
}

// endsWrap reports whether byte b, with the parser in state before and
// taking action, ends a pending wrap.
func endsWrap(before parser.State, action parser.Action, b byte) bool {
	switch action {
	case parser.ExecuteAction:
		return b == ansi.BS || (b >= ansi.LF && b <= ansi.CR) || b == ansi.IND
	case parser.DispatchAction:
		switch before {
		case parser.CsiEntryState, parser.CsiParamState, parser.CsiIntermediateState:
			return b < 128 && csiEndsWrap[b]
		case parser.EscapeState:
			return b == 'D' || b == 'c'
		}
	}
	return false
}
