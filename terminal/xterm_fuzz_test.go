package terminal

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// token makes one piece of an escape-heavy stream.
type token func(r *rand.Rand, cols, rows int) string

// safeTokens are common sequences: text, controls, cursor moves, erases,
// SGR, saved cursor, modes, titles, the alternate screen, scroll regions
// from the top.
var safeTokens = []token{
	func(r *rand.Rand, _, _ int) string {
		return []string{"a", "word ", "Hello, world", "0123456789", "~!@#"}[r.IntN(5)]
	},
	func(r *rand.Rand, _, _ int) string { return []string{"\r", "\n", "\r\n", "\b", "\t"}[r.IntN(5)] },
	func(r *rand.Rand, c, w int) string { return fmt.Sprintf("\x1b[%d;%dH", 1+r.IntN(w), 1+r.IntN(c)) },
	func(r *rand.Rand, _, _ int) string {
		return fmt.Sprintf("\x1b[%d%c", r.IntN(4), "ABCDEFGd`"[r.IntN(9)])
	},
	func(r *rand.Rand, _, _ int) string { return fmt.Sprintf("\x1b[%dK", r.IntN(3)) },
	func(r *rand.Rand, _, _ int) string { return fmt.Sprintf("\x1b[%dJ", r.IntN(2)) },
	func(r *rand.Rand, _, _ int) string { return fmt.Sprintf("\x1b[%d%c", r.IntN(3), "@PXLM"[r.IntN(5)]) },
	func(r *rand.Rand, _, _ int) string {
		return []string{"\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[3m", "\x1b[4m", "\x1b[5m", "\x1b[7m", "\x1b[8m", "\x1b[9m",
			"\x1b[22m", "\x1b[24m", "\x1b[27m", "\x1b[31m", "\x1b[42m", "\x1b[93m", "\x1b[104m", "\x1b[39;49m"}[r.IntN(17)]
	},
	func(r *rand.Rand, _, _ int) string { return fmt.Sprintf("\x1b[38;5;%dm", r.IntN(256)) },
	func(r *rand.Rand, _, _ int) string {
		return fmt.Sprintf("\x1b[48;2;%d;%d;%dm", r.IntN(256), r.IntN(256), r.IntN(256))
	},
	func(r *rand.Rand, _, _ int) string { return []string{"\x1b7", "\x1b8"}[r.IntN(2)] },
	func(r *rand.Rand, _, _ int) string {
		return []string{"\x1b[?25l", "\x1b[?25h", "\x1b[?2004h", "\x1b[?1h"}[r.IntN(4)]
	},
	func(r *rand.Rand, _, _ int) string {
		// titles, and OSC strings xterm.js reads otherwise than x/ansi: an
		// identifier that is not digits or none, no payload, leading zeros
		return fmt.Sprintf([]string{"\x1b]0;title %d\x07", "\x1b]2\x07%.0d", "\x1b]2x;t%d\x07", "\x1b];t%d\x07",
			"\x1b]002;z%d\x1b\\", "\x1b]1;icon %d\x07"}[r.IntN(6)], r.IntN(100))
	},
	func(r *rand.Rand, _, _ int) string { return []string{"\x1b[?1049h", "\x1b[?1049l"}[r.IntN(2)] },
	func(r *rand.Rand, _, w int) string { return fmt.Sprintf("\x1b[1;%dr", 2+r.IntN(w-1)) },
	func(r *rand.Rand, _, _ int) string { return "\x1b[r" },
}

// allTokens add what x/vt v0.1.0 got wrong: wide characters and emoji, ED 2,
// scroll regions away from the top, mode 47, origin mode, and erasing at a
// pending wrap.
var allTokens = append(append([]token(nil), safeTokens...),
	func(r *rand.Rand, _, _ int) string {
		return []string{"日", "本語", "😀", "✅", "👍🏽", "é", "é"}[r.IntN(7)]
	},
	func(r *rand.Rand, _, _ int) string { return "\x1b[2J" },
	func(r *rand.Rand, _, w int) string {
		t := 2 + r.IntN(w-2)
		return fmt.Sprintf("\x1b[%d;%dr", t, t+1+r.IntN(w-t))
	},
	func(r *rand.Rand, _, _ int) string {
		return []string{"\x1b[?47h", "\x1b[?47l", "\x1b[?6h", "\x1b[?6l"}[r.IntN(4)]
	},
	func(r *rand.Rand, c, _ int) string { return strings.Repeat("x", c) + "\x1b[K" },
	// DECSCA and selective erase; underline styles and colours, hyperlinks
	func(r *rand.Rand, _, _ int) string {
		return []string{"\x1b[1\"q", "\x1b[0\"q", "\x1b[2\"q", "\x1b[?J", "\x1b[?1J", "\x1b[?2J", "\x1b[?K", "\x1b[?1K", "\x1b[?2K",
			"\x1b[4:3m", "\x1b[4:2;58;5;9m", "\x1b[58:2::1:2:3m", "\x1b[59m", "\x1b[21m",
			"\x1b]8;;http://a/\x07", "\x1b]8;id=1;http://b/\x1b\\", "\x1b]8;;\x07"}[r.IntN(17)]
	},
	// colours set and restored
	func(r *rand.Rand, _, _ int) string {
		return []string{fmt.Sprintf("\x1b]4;%d;#%06x\x07", r.IntN(300), r.IntN(1<<24)), "\x1b]104\x07", "\x1b]104;1;2\x07",
			fmt.Sprintf("\x1b]1%d;rgb:%x/%x/%x\x07", r.IntN(3), r.IntN(16), r.IntN(16), r.IntN(16)), "\x1b]110\x07", "\x1b]111\x07"}[r.IntN(6)]
	},
	// REP, as ncurses writes runs (htop's meters): after a character or not
	func(r *rand.Rand, _, _ int) string {
		return []string{"|", "", "日", "é", "\x1b[31m"}[r.IntN(5)] + fmt.Sprintf("\x1b[%db", r.IntN(30))
	},
)

// generate makes n streams of tokens.
func generate(seed uint64, n int, tokens []token, cols, rows int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 15))
	out := make([][]byte, n)
	for i := range out {
		var b strings.Builder
		for range 5 + r.IntN(60) {
			b.WriteString(tokens[r.IntN(len(tokens))](r, cols, rows))
		}
		out[i] = []byte(b.String())
	}
	return out
}

// fuzzBudget is how many streams each generated comparison runs:
// TABBRIDGE_XTERM_FUZZ, default 300 (about two seconds of xterm.js).
func fuzzBudget() int {
	if n, err := strconv.Atoi(os.Getenv("TABBRIDGE_XTERM_FUZZ")); err == nil && n > 0 {
		return n
	}
	return 300
}

// TestRedrawMatchesXtermGenerated compares generated escape-heavy streams
// (TABBRIDGE_XTERM_FUZZ of them per set, default 300) with xterm.js, and
// fails on any that differs. (x/vt v0.1.0, the terminal of record before
// term.go, got 178 of the common set and 265 of the full set wrong.)
func TestRedrawMatchesXtermGenerated(t *testing.T) {
	const cols, rows = 20, 6
	n := fuzzBudget()
	for _, set := range []struct {
		name   string
		tokens []token
	}{{"common", safeTokens}, {"all", allTokens}} {
		t.Run(set.name, func(t *testing.T) {
			streams := generate(uint64(len(set.name)), n, set.tokens, cols, rows)
			cs, rs := make([]int, n), make([]int, n)
			for i := range streams {
				cs[i], rs[i] = cols, rows
			}
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("%s stream %d", set.name, i)
			}
			if failed := compareWithXterm(t, names, cs, rs, streams); failed > 0 {
				t.Errorf("%d of %d generated streams (%s) differ from xterm.js", failed, n, set.name)
			}
		})
	}
}

// randomPieces are what random streams are drawn from: introducers,
// parameters, intermediates, finals, C0 and C1 controls as bytes and as
// UTF-8, invalid bytes, wide, combining and joining characters.
var randomPieces = []string{"\x1b", "[", "]", "P", "_", "^", "X", ";", ":", "?", ">", "<", "=", "!", "\"", "$", " ", "#", "%", "(", ")", "*", "+",
	"0", "1", "2", "3", "4", "5", "7", "8", "9", "m", "H", "J", "K", "q", "p", "r", "s", "u", "t", "h", "l", "c", "n", "x", "b", "@",
	"A", "B", "C", "D", "E", "L", "M", "S", "T", "Z", "`", "d", "f", "g", "a", "\\", "G", "I", "k", "w", "y", "z", "W", "Y", "N", "O",
	"\x07", "\x08", "\x09", "\x0a", "\x0d", "\x18", "\x1a", "\x7f", "\x0e", "\x0f", "\x1b\\", "é", "日", "😀", "\u0301", "\u200d", "\ufe0f",
	"\u009c", "\u009b", "\u0090", "\u009d", "\x9c", "\x90", "\xff", "\xe2\x9c", "\x1b[", "\x1b]", "\x1bP", "\x1b(", "\x1b#"}

// randomPieceRuns makes n runs of 20 to 169 pieces from seed.
func randomPieceRuns(seed uint64, n int) [][]string {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([][]string, n)
	for i := range out {
		for range 20 + r.IntN(150) {
			out[i] = append(out[i], randomPieces[r.IntN(len(randomPieces))])
		}
	}
	return out
}

// TestRedrawMatchesXtermOnRandomBytes compares random streams of pieces
// (randomPieces) with xterm.js through the attach payload and a probe
// written after it: 1,500 of them, or TABBRIDGE_XTERM_FUZZ when larger.
// Most end inside a sequence, which the redraw must leave the viewer inside
// as well (streamState.resume). When it was written 275 of 1,500 differed:
// 271 so, four by x/ansi's reading of two intermediates and a join that CAN
// or SUB ending a string left open.
func TestRedrawMatchesXtermOnRandomBytes(t *testing.T) {
	runs := randomPieceRuns(7, max(fuzzBudget(), 1500))
	n := len(runs)
	streams, names := make([][]byte, n), make([]string, n)
	cs, rs := make([]int, n), make([]int, n)
	for i, run := range runs {
		streams[i], names[i], cs[i], rs[i] = []byte(strings.Join(run, "")), fmt.Sprintf("random stream %d", i), 20, 6
	}
	if failed := compareWithXterm(t, names, cs, rs, streams); failed > 0 {
		t.Errorf("%d of %d random streams differ from xterm.js", failed, n)
	}
}

// TestModelMatchesXtermOnRandomWrites writes random streams of pieces in
// random writes, a sixth of them after a resize to 5–24 × 2–9, and compares
// the model itself with xterm.js after every write (and a fresh viewer's
// attach payload): 1,500 streams, or TABBRIDGE_XTERM_FUZZ when larger.
// Writes are split between pieces, so never inside a character: xterm.js's
// UTF-8 decoder loses a character split after a continuation byte whose low
// six bits are zero (E2 80 | 8D, a zero-width joiner, vanishes), which the
// model does not copy, since batches are cut only between characters but
// inside strings (docs/DECISIONS.md). When it was written 37 of 1,500
// differed (and 34 of the 1,500 redraws above, once "ESC (" was among the
// pieces): a character set xterm.js does not know (ESC ( u) left the
// designation as it was there and set ASCII in the model.
func TestModelMatchesXtermOnRandomWrites(t *testing.T) {
	runs := randomPieceRuns(11, max(fuzzBudget(), 1500))
	r := rand.New(rand.NewPCG(3, 11))
	var names []string
	var cs, rs []int
	var steps [][]xtermStep
	for i, parts := range runs {
		var st []xtermStep
		for len(parts) > 0 {
			k := 1 + r.IntN(len(parts))
			s := xtermStep{Data: []byte(strings.Join(parts[:k], ""))}
			if r.IntN(6) == 0 {
				s.Cols, s.Rows = 5+r.IntN(20), 2+r.IntN(8)
			}
			st, parts = append(st, s), parts[k:]
		}
		names, cs, rs = append(names, fmt.Sprintf("random writes %d", i)), append(cs, 20), append(rs, 6)
		steps = append(steps, st)
	}
	if failed := compareSteppedWithXterm(t, names, cs, rs, steps); failed > 0 {
		t.Errorf("%d of %d random streams differ from xterm.js", failed, len(runs))
	}
}
