package terminal

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// recordedStream strings together every kind of output the redraw tests
// know, including the 0x9C title and an unterminated-looking dirty state.
func recordedStream() string {
	return strings.Join([]string{
		colourStream(), "\x1b]0;" + claudeTitle + "\x07", spinnerStream(), scrollRegionStream(),
		"\x1b[r\x1b[?6l", altScreenStream(), modesStream(), "\x1b[?1049l\x1b[?7h", dirtyStream,
		"\x1b]8;;https://x/✳\x1b\\linked\x1b]8;;\x1b\\\r\n", strings.Repeat("full width row!! ", 10),
	}, "")
}

// TestCutThenRedrawNeverGarbles is the property the cutter exists for: cut
// a recorded stream where the coalescer would (chunks of random sizes, the
// preferred point in each), redraw the screen at the cut into a fresh
// emulator, feed it the rest, and it must end exactly like the original.
func TestCutThenRedrawNeverGarbles(t *testing.T) {
	stream := []byte(recordedStream())
	want := feed(40, 12, string(stream))
	defer want.close()
	final := observe(want)
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cuts := cutPoints(stream, rng)
		src := newTerm(40, 12)
		at := 0
		for i, cut := range cuts {
			src.write(stream[at:cut])
			at = cut
			if i%max(len(cuts)/60, 1) != 0 {
				continue // check about 60 cuts per seed
			}
			dst := newTerm(40, 12)
			dst.write(src.redraw())
			dst.write(stream[cut:])
			if d := final.diff(observe(dst)); len(d) > 0 {
				t.Fatalf("seed %d: cut at %d of %d (%q|%q) garbles:\n%s", seed, cut, len(stream),
					stream[max(cut-20, 0):cut], stream[cut:min(cut+20, len(stream))], strings.Join(d, "\n"))
			}
			dst.close()
		}
		src.close()
	}
}

// cutPoints splits stream into chunks of 1–64 bytes, as PTY reads would,
// and returns the absolute offsets the cutter picks, one per chunk at most.
func cutPoints(stream []byte, rng *rand.Rand) []int {
	c := NewCutter()
	var cuts []int
	for at := 0; at < len(stream); {
		n := min(1+rng.IntN(64), len(stream)-at)
		clear, ground := c.Scan(stream[at : at+n])
		if clear > 0 {
			cuts = append(cuts, at+clear)
		} else if ground > 0 {
			cuts = append(cuts, at+ground)
		}
		at += n
	}
	return cuts
}

func TestCutterKeepsC1ByteInsideTitle(t *testing.T) {
	c := NewCutter()
	title := "\x1b]0;" + claudeTitle + "\x07"
	_, ground := c.Scan([]byte(title[:len(title)-1]))
	if ground != -1 {
		t.Fatalf("cutter reports ground at %d inside the OSC (0x9C taken as ST)", ground)
	}
	if _, ground = c.Scan([]byte("\x07")); ground != 1 {
		t.Fatalf("ground %d after BEL, want 1", ground)
	}
}
