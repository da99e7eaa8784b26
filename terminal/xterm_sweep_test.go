//go:build !windows

package terminal

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// sweepStep is one step of a swept program: wait for the output to match
// (or a person's pace), type keys, then resize when cols > 0.
type sweepStep struct {
	wait       string
	keys       string
	cols, rows int
}

// sweepProgram is a real program driven in a real PTY.
type sweepProgram struct {
	name       string
	cols, rows int
	script     string // run by sh -c, in a UTF-8 locale
	steps      []sweepStep
}

// recordSweep runs p in a PTY, its fixture in dir, and returns its output
// as writes and resizes.
func recordSweep(t *testing.T, p sweepProgram, dir string) []wireStep {
	t.Helper()
	c := newCollector()
	s := start(t, c, p.cols, p.rows, "sh", "-c", "export LANG=C.UTF-8 LC_ALL=C.UTF-8 D='"+dir+"'; "+p.script)
	return driveRecording(t, c, s, p.steps, 400*time.Millisecond, 3*time.Second)
}

// driveRecording types steps into session s, whose output c collects, and
// returns the output as writes cut at each resize, then the resizes: each
// step waits for its regexp over the whole output (or pace, a person's),
// types its keys, and resizes. It waits at most end for the program to exit.
func driveRecording(t *testing.T, c *collector, s *Session, steps []sweepStep, pace, end time.Duration) []wireStep {
	t.Helper()
	var out []wireStep
	taken := 0
	take := func() {
		b := c.bytes()
		if len(b) > taken {
			out = append(out, wireStep{W: base64.StdEncoding.EncodeToString(b[taken:])})
			taken = len(b)
		}
	}
	for _, st := range steps {
		if st.wait != "" {
			c.waitFor(t, regexp.MustCompile(st.wait))
		} else {
			time.Sleep(pace) // a person's pace; the recorder is not a test
		}
		for _, k := range []byte(st.keys) {
			_ = s.Input([]byte{k})
		}
		if st.cols > 0 {
			time.Sleep(300 * time.Millisecond)
			take()
			if err := s.Resize(st.cols, st.rows); err != nil {
				t.Fatal(err)
			}
			out = append(out, wireStep{R: []int{st.cols, st.rows}})
		}
	}
	select {
	case <-s.Done():
	case <-time.After(end):
	}
	take()
	return out
}

// TestSweepXtermPrograms is the tool the corpus was grown with
// (TABBRIDGE_SWEEP_XTERM=regexp of names to run): it records programs
// the corpus does not hold, compares the attach payload with xterm.js at
// TABBRIDGE_SWEEP_CUTS (default 80) ground points through the output up to
// the first resize, and after every step with the resizes. Recordings go
// to TABBRIDGE_SWEEP_KEEP (a directory) when set.
func TestSweepXtermPrograms(t *testing.T) {
	only := os.Getenv("TABBRIDGE_SWEEP_XTERM")
	if only == "" {
		t.Skip("set TABBRIDGE_SWEEP_XTERM=regexp to sweep programs")
	}
	re := regexp.MustCompile(only)
	cuts := 80
	if n, err := strconv.Atoi(os.Getenv("TABBRIDGE_SWEEP_CUTS")); err == nil && n > 0 {
		cuts = n
	}
	dir := t.TempDir()
	for _, p := range sweepPrograms() {
		if !re.MatchString(p.name) {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			wire := recordSweep(t, p, dir)
			if keep := os.Getenv("TABBRIDGE_SWEEP_KEEP"); keep != "" {
				body, _ := json.Marshal(recordedResize{Cols: p.cols, Rows: p.rows, Steps: wire})
				_ = os.WriteFile(filepath.Join(keep, p.name+".json"), body, 0o644)
			}
			var steps []xtermStep
			var first []byte
			resized := false
			for _, s := range wire {
				if s.R != nil {
					steps = append(steps, xtermStep{Cols: s.R[0], Rows: s.R[1]})
					resized = true
					continue
				}
				data, _ := base64.StdEncoding.DecodeString(s.W)
				steps = append(steps, xtermStep{Data: data})
				if !resized {
					first = append(first, data...)
				}
			}
			names, cs, rs, streams := []string{p.name}, []int{p.cols}, []int{p.rows}, [][]byte{first}
			last := 0
			for k := 1; k < cuts; k++ {
				if _, g := NewCutter().Scan(first[:len(first)*k/cuts]); g > last {
					names = append(names, fmt.Sprintf("%s at byte %d", p.name, g))
					cs, rs, streams = append(cs, p.cols), append(rs, p.rows), append(streams, first[:g])
					last = g
				}
			}
			failed := compareWithXterm(t, names, cs, rs, streams)
			t.Logf("%s: %d bytes before a resize, %d of %d cuts differ", p.name, len(first), failed, len(streams))
			if resized {
				if f := compareSteppedWithXterm(t, []string{p.name}, []int{p.cols}, []int{p.rows}, [][]xtermStep{steps}); f > 0 {
					t.Errorf("%s differs from xterm.js with resizes", p.name)
				}
			}
		})
	}
}

// keptSweeps are the swept programs kept in the corpus, for what they
// exercise that no other recording does: each as NAME-COLSxROWS.bin (its
// output before the first resize, which TestRedrawMatchesXterm cuts at
// ground points) and, when it resizes, as resize/NAME.json.
var keptSweeps = []string{
	"underline-styles", // SGR 4:n, 21, 58, 59, OSC 8 with and without id, 256 and true colour
	"protected",        // DECSCA, DECSED, DECSEL
	"columns",          // DECIC, DECDC, SL, SR
	"charsets",         // G0–G3, SO, LS2/LS3, national sets
	"tabs",             // tabs(1), HTS, TBC, CHT, CBT
	"apt-progress",     // dpkg's progress line kept out of a DECSTBM region by DECSC/DECRC
	"emacs",            // emacs -nw: split windows, resized
	"zsh",              // zsh's completion menu and right prompt, resized
	"fzf-height",       // fzf below the prompt (not the alternate screen)
	"git-add-p",        // git add -p, coloured hunks
	"screen",           // GNU screen: split regions, resized
	"weechat",          // weechat offline, resized
	"ls-hyperlink",     // ls --hyperlink: OSC 8 file links, a long name wrapping, one left open
}

// TestRecordSweptCorpus records keptSweeps again (TABBRIDGE_RECORD_XTERM=1,
// and TABBRIDGE_RECORD_ONLY=regexp to record only some).
func TestRecordSweptCorpus(t *testing.T) {
	if os.Getenv("TABBRIDGE_RECORD_XTERM") == "" {
		t.Skip("set TABBRIDGE_RECORD_XTERM=1 to record the corpus again")
	}
	only := regexp.MustCompile(os.Getenv("TABBRIDGE_RECORD_ONLY"))
	progs := map[string]sweepProgram{}
	for _, p := range sweepPrograms() {
		progs[p.name] = p
	}
	dir := t.TempDir()
	for _, name := range keptSweeps {
		p, ok := progs[name]
		if !ok {
			t.Fatalf("keptSweeps names %s, which sweepPrograms does not hold", name)
		}
		if !only.MatchString(name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			wire := recordSweep(t, p, dir)
			var first []byte
			resized := false
			for _, s := range wire {
				if s.R != nil {
					resized = true
					break
				}
				data, _ := base64.StdEncoding.DecodeString(s.W)
				first = append(first, data...)
			}
			bin := filepath.Join("testdata", "xterm", name+"-"+itoa(p.cols)+"x"+itoa(p.rows)+".bin")
			if err := os.WriteFile(bin, first, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d bytes", bin, len(first))
			if resized {
				body, _ := json.Marshal(recordedResize{Cols: p.cols, Rows: p.rows, Steps: wire})
				name := filepath.Join("testdata", "xterm", "resize", name+".json")
				if err := os.WriteFile(name, body, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d steps, %d bytes", name, len(wire), len(body))
			}
		})
	}
}
