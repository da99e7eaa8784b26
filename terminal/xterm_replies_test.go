package terminal

import (
	"strings"
	"testing"
)

// TestRepliesMatchXterm checks the model's answers to terminal queries
// (the daemon answers them; the viewer's are silenced) against xterm.js's
// own, after modes the program set: DECRQM for every mode xterm.js knows,
// device attributes and status reports.
func TestRepliesMatchXterm(t *testing.T) {
	var queries strings.Builder
	for _, m := range []string{"1", "3", "6", "7", "8", "9", "12", "25", "45", "47", "66", "67", "1000", "1002", "1003",
		"1004", "1005", "1006", "1015", "1016", "1047", "1048", "1049", "2004", "2026", "69", "9999"} {
		queries.WriteString("\x1b[?" + m + "$p")
	}
	for _, m := range []string{"2", "4", "12", "20", "34"} {
		queries.WriteString("\x1b[" + m + "$p")
	}
	queries.WriteString("\x1b[c\x1b[>c\x1b[5n\x1b[6n\x1b[?6n")
	q := queries.String()
	streams := []string{
		q,
		"\x1b[?12l\x1b[?1h\x1b[?6h\x1b[?1003h\x1b[?1016h\x1b[?2004h\x1b[4h\x1b[20h\x1b[?25l\x1b[3;5H" + q,
		"\x1b[?12l\x1b[?12h\x1b[?1049h\x1b[?1002h\x1b[?1006h\x1b[?2026h\x1b[?45h\x1b[?7l\x1b[?66h\x1bc" + q,
		"\x1b[?12l\x1b[!p\x1b[?9h\x1b[?47h\x1b[?1004h" + q,
	}
	compareRepliesWithXterm(t, streams)
}

// TestStatusStringRepliesMatchXterm checks DECRQSS (DCS $ q Pt ST), which
// the viewer's xterm.js is silenced for and the model answers (vim asks for
// the cursor's style, neovim for SGR): every setting xterm.js reports, after
// the program changed it, and requests it does not know, cut short, too
// long, with parameters, or aborted.
func TestStatusStringRepliesMatchXterm(t *testing.T) {
	rq := func(pt string) string { return "\x1bP$q" + pt + "\x1b\\" }
	all := rq(`"q`) + rq(`"p`) + rq("r") + rq("m") + rq(" q")
	streams := []string{
		all,
		"\x1b[1\"q\x1b[3;5r\x1b[?12l\x1b[4 q\x1b[1;31m" + all,
		"\x1b[2\"q\x1b[?1049h\x1b[2;4r\x1b[?12h" + all,
		rq("x") + rq("") + rq("rr") + rq(`"`) + rq(" q ") + rq(strings.Repeat("r", 100)) + rq("日"),
		"\x1bP1$qr\x1b\\\x1bP0;1$q\"q\x1b\\",                                                  // parameters change nothing
		"\x1bP$qr\x18\x1bP$qm\x1a\x1bP$q\"q\x1bX",                                             // aborted by CAN and SUB; ended by ESC
		"\x1bP$qr\x07m\x1b\\",                                                                 // BEL is ignored inside
		"\x1bP+q5463\x1b\\\x1bPq#0;2;0;0;0#0~~\x1b\\",                                         // XTGETTCAP and sixel: no answer
		rq(strings.Repeat("r", oscPayloadLimit)) + rq(strings.Repeat("r", oscPayloadLimit+1)), // over xterm.js's limit: no answer
	}
	compareRepliesWithXterm(t, streams)
}

// compareRepliesWithXterm checks the model's replies to each stream, written
// at once to a 20×6 terminal, against xterm.js's.
func compareRepliesWithXterm(t *testing.T, streams []string) {
	t.Helper()
	var cases []xtermCase
	for _, s := range streams {
		cases = append(cases, xtermCase{Cols: 20, Rows: 6, Streams: [][]byte{[]byte(s)}})
	}
	for i, d := range runXterm(t, cases) {
		m := newTerm(20, 6)
		m.write([]byte(streams[i]))
		var got strings.Builder
		for len(m.replies) > 0 {
			got.Write(<-m.replies)
		}
		m.close()
		if got.String() != d[0].Replies {
			t.Errorf("stream %d %q:\n  replies %q\n  want    %q", i, streams[i][:min(len(streams[i]), 120)], got.String(), d[0].Replies)
		}
	}
}
