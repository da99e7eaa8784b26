package terminal

import (
	"fmt"
	"strings"
	"testing"
)

// TestHugeCountsMatchSmallOnes checks that a count of 2,000,000,000 in a sequence
// xterm.js repeats once per count (SU, SD, IL, DL, CHT, CBT, and REP
// without autowrap) leaves what a count just past its effect leaves: the
// emulator stops where nothing changes any more (the loops took it seconds to minutes:
// found by FuzzEmulatorRedraw). TestRedrawMatchesXterm compares counts of
// 100,000 with xterm.js itself.
func TestHugeCountsMatchSmallOnes(t *testing.T) {
	const setup = "1\r\n2\r\n3日\r\n4\r\n5\r\n6\x1b[2;5r\x1b[3;2H\x1b[33m"
	for _, seq := range []string{"S", "T", "L", "M", "I", "Z"} {
		huge := newTerm(20, 6)
		huge.write([]byte(setup + "\x1b[2000000000" + seq + "x"))
		small := newTerm(20, 6)
		small.write([]byte(setup + "\x1b[21" + seq + "x"))
		if d := observe(huge).diff(observe(small)); len(d) > 0 {
			t.Errorf("CSI 2000000000 %s differs from CSI 21 %s:\n%s", seq, seq, strings.Join(d, "\n"))
		}
	}
	huge, small := newTerm(20, 6), newTerm(20, 6)
	huge.write([]byte("\x1b[?7lab日\x1b[2000000000b"))
	small.write([]byte("\x1b[?7lab日\x1b[42b"))
	if d := observe(huge).diff(observe(small)); len(d) > 0 {
		t.Errorf("REP 2000000000 without autowrap differs:\n%s", strings.Join(d, "\n"))
	}
}

// hugeCountStreams are corpus streams with counts of 100,000 (xterm.js
// repeats each once per count).
func hugeCountStreams() map[string]string {
	const setup = "1\r\n2\r\n3日\r\n4\r\n5\r\n6\x1b[2;5r\x1b[3;2H\x1b[33m"
	out := map[string]string{}
	for _, seq := range []string{"S", "T", "L", "M", "I", "Z"} {
		out[fmt.Sprintf("count 100000 %s", seq)] = setup + "\x1b[100000" + seq + "x"
	}
	// (a wide character repeated without autowrap ends as xterm.js's wide
	// character without its second half, which a redraw cannot make:
	// TestHugeCountsMatchSmallOnes checks the model there)
	out["count 100000 REP no wrap"] = "\x1b[?7lab\x1b[100000b\r\ne\u0301\x1b[100001b\r\n\x1b[4hxy\x1b[100001b"
	return out
}
