package terminal

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// compareWritesWithXterm checks each stream, written at once to a 20×6
// terminal, against xterm.js fed the same bytes: the model's own cells
// exactly (text, width, colours, attributes, extended attributes), its
// wrap flags and line counts, and a fresh viewer's attach payload (tab
// stops, modes, cursor and the probe included), as the resize tests do.
func compareWritesWithXterm(t *testing.T, streams map[string]string) {
	t.Helper()
	var names []string
	var cols, rows []int
	var steps [][]xtermStep
	for name, s := range streams {
		names = append(names, fmt.Sprintf("%s %q", name, s))
		cols, rows = append(cols, 20), append(rows, 6)
		steps = append(steps, []xtermStep{{Data: []byte(s)}})
	}
	if failed := compareSteppedWithXterm(t, names, cols, rows, steps); failed > 0 {
		t.Errorf("%d of %d streams differ from xterm.js", failed, len(streams))
	}
}

// utf8C1Streams send C1 controls (U+0080–U+009F) as two-byte UTF-8.
// xterm.js decodes UTF-8 before its parser, which reads these code points
// as the 8-bit controls: CSI, OSC, DCS, ST, SOS/PM/APC, IND, NEL, HTS
// (others do nothing), from any state, and ST ends a string. The model
// printed them (executing only IND, NEL and HTS).
var utf8C1Streams = map[string]string{
	"csi":               "a\xc2\x9b31mred\x1b[0m",
	"csi twice":         "ab\xc2\x9bsome\xc2\x9b5Cx",
	"osc ended by st":   "a\xc2\x9d0;ttl\xc2\x9cb",
	"st ends esc osc":   "\x1b]0;t\xc2\x9cX",
	"dcs":               "ab\xc2\x90qz\xc2\x9cc",
	"apc":               "ab\xc2\x9fhidden\xc2\x9cc",
	"ind nel hts":       "ab\xc2\x84c\xc2\x85d\xc2\x88e\r\n\tX",
	"ri does nothing":   "ab\xc2\x8dc",
	"csi leaves an osc": "\x1b]0;ab\xc2\x9b31mX",
	"csi leaves a dcs":  "\x1bP$q\xc2\x9b31mX\x1b\\Y",
	"csi inside a csi":  "\x1b[3\xc2\x9b31mX",
	"ind inside a csi":  "\x1b[3\xc2\x84X",
	"st then rep":       "e\u0301\xc2\x9c\x1b[3b|",
	"c1 in a title":     "\x1b]2;a\xc2\x85b\x07c",
}

// TestUTF8C1MatchesXterm checks C1 controls sent as UTF-8 against xterm.js.
func TestUTF8C1MatchesXterm(t *testing.T) {
	compareWritesWithXterm(t, utf8C1Streams)
}

// droppedStreams are sequences xterm.js's parser drops, in part or whole,
// where x/ansi's (under the model) did otherwise: a private marker after
// parameters or a parameter after an intermediate (xterm.js ignores the
// sequence to its final byte; x/ansi dispatched the first and ended the
// second early, printing the rest), a character that is not ASCII inside a
// sequence, SOS, PM or APC (an error: xterm.js drops it and the sequence;
// x/ansi printed it), ESC after DCS (an escape for xterm.js, data for
// x/ansi), a DCS xterm.js ignores; and, as checks, CAN and SUB aborting,
// DEL, too many parameters and sub-parameters, which both read alike.
var droppedStreams = map[string]string{
	"private after params":       "ab\x1b[3<1mcd",
	"param after intermediate":   "ab\x1b[$31mcd",
	"params after space":         "ab\x1b[ 1;2\x1b[32mX",
	"c0 while ignored":           "ab\x1b[1<\x01\x0a2mX",
	"esc while ignored":          "ab\x1b[1<\x1b[31mX",
	"can while ignored":          "ab\x1b[1<\x18mX",
	"utf-8 while ignored":        "ab\x1b[1<\xc3\xa9mX",
	"c1 while ignored":           "ab\x1b[1<\xc2\x9b31mX",
	"non-ascii in csi":           "ab\x1b[2\xc3\xa9Jcd",
	"wide in csi":                "ab\x1b[2\xe6\x97\xa5Jcd",
	"non-ascii after esc":        "ab\x1b\xc3\xa9cd",
	"non-ascii after esc (":      "ab\x1b(\xc3\xa9cd",
	"non-ascii in apc":           "ab\x1b_x\xc3\xa9yz\x1b\\Q",
	"wide in pm":                 "ab\x1b^x\xe6\x97\xa5yz\x1b\\Q",
	"esc after dcs":              "ab\x1bP\x1b[31mX",
	"dcs private after params":   "ab\x1bP1<q\x1b[31mX\x1b\\Y",
	"dcs param after intermed.":  "ab\x1bP1$2qzz\x1b\\Y",
	"can aborts csi":             "\x1b[31mab\x1b[1;\x18mcd",
	"sub aborts csi":             "ab\x1b[3\x1a1mcd",
	"can aborts osc":             "ab\x1b]0;x\x18cd",
	"can aborts dcs":             "ab\x1bP1q\x18cd",
	"can aborts esc":             "ab\x1b(\x18cd",
	"del in csi":                 "ab\x1b[3\x7f1mcd",
	"del then rep":               "a\x7f\x1b[3b|",
	"intermediate before final":  "ab\x1b[1 mcd",
	"two intermediates":          "ab\x1b[31!\"mcd",
	"too many params":            "\x1b[" + strings.Repeat("1;", 40) + "31mX",
	"too many sub-params":        "\x1b[38:2:1:2:3:4:5:6:7:8:9:10:11:12:13:14:15:16:17:18:19:20:21:22:23:24:25:26:27:28:29:30:31:32:33:34:35:36mX",
	"private markers":            "ab\x1b[?31m\x1b[>31m\x1b[=1mcd",
	"stray c1 bytes in sequence": "ab\x1b[3\x9b1mcd",
}

// TestDroppedSequencesMatchXterm checks malformed and aborted sequences
// cell for cell against xterm.js.
func TestDroppedSequencesMatchXterm(t *testing.T) {
	compareWritesWithXterm(t, droppedStreams)
}

// TestAlignmentPatternMatchesXterm checks DECALN (ESC # 8): xterm.js fills
// the screen with E in the pen's colours and flags but a fresh cell's
// extended attributes, so a hyperlink, an underline style or colour in the
// pen does not reach the E's; the model had copied the whole pen.
func TestAlignmentPatternMatchesXterm(t *testing.T) {
	compareWritesWithXterm(t, map[string]string{
		"colours and flags":  "\x1b[31;44;1;4mab\x1b#8\x1b[0m",
		"link and curly":     "\x1b]8;;http://x/\x07\x1b[4:3m\x1b#8",
		"underline colour":   "\x1b[4;58;5;3m\x1b#8x",
		"colour alone":       "\x1b[58;5;3m\x1b#8x",
		"region and cursor":  "\x1b[3;4r\x1b[5;5H\x1b[31m\x1b#8x",
		"protected":          "\x1b[1\"q\x1b[7;9m\x1b#8\x1b[?2J",
		"saved pen extended": "\x1b[4:2m\x1b]8;;http://y/\x07\x1b7\x1b[0m\x1b8\x1b#8",
	})
}

// TestTabStopAtColumnZeroMatchesXterm checks the tab stop xterm.js sets at
// column 0 (setupTabStops starts there): no tab moves to it, but TBC can
// clear it and HTS set it, and a viewer that attached must have the same
// stops. The model had none there, and the redraw took a cleared one for
// the default.
func TestTabStopAtColumnZeroMatchesXterm(t *testing.T) {
	compareWritesWithXterm(t, map[string]string{
		"tbc at 0":            "\x1b[5G\x1b[0g\x1b[1G\x1b[0g\x1b[5G\x1b[2Z@",
		"tbc at 0, cbt":       "\x1b[1G\x1b[g\x1b[15G\x1b[3Z@",
		"hts at 0 after tbc3": "\x1b[3g\x1bH\x1b[5G\x1b[Z Y",
		"hts at 0, cht":       "\x1b[3g\x1b[1G\x1bH\x1b[10G\x1bH\x1b[15G\x1b[3Z@\x1b[1G\x1b[2I#",
		"only 0":              "\x1b[3g\x1b[1;1H\x1bH\x1b[5G\x1b[Z\x1b[Z@\tX",
		"none":                "\x1b[3g\x1b[12G\x1b[Z@\x1b[1I#",
		"decst8c":             "\x1b[3g\x1b[?5W\tX",
		"hts by c1":           "ab\xc2\x88\r\x1b[0g\x1b[3Z@",
	})
}

// TestWideWithoutAutowrapMatchesXterm checks wide characters at the right
// margin with autowrap off: one that does not fit is dropped and the
// cursor stays in the last column; the next character of the same run
// (xterm.js prints a run in one call) overwrites the second half of the
// wide character there without blanking its first half, which only the
// start of a new run does. The model blanked it at every ASCII run.
func TestWideWithoutAutowrapMatchesXterm(t *testing.T) {
	z := strings.Repeat("z", 18)
	compareWritesWithXterm(t, map[string]string{
		"dropped then ascii":      "\x1b[?7l" + z + "日本x",
		"two wide":                "\x1b[?7l" + z + "日日x",
		"stray byte in the run":   "\x1b[?7l" + z + "日\x80本x",
		"sgr ends the run":        "\x1b[?7l" + z + "日\x1b[m本x",
		"combining mark":          "\x1b[?7l" + z + "日本\u0301x",
		"insert mode":             "\x1b[?7l\x1b[4h" + z + "日本x",
		"dec graphics":            "\x1b[?7l\x1b(0" + z + "日本qx",
		"rep after":               "\x1b[?7l" + z + "日本\x1b[2bx",
		"fits":                    "\x1b[?7l" + strings.Repeat("z", 19) + "日x",
		"at pending wrap":         "\x1b[?7l" + strings.Repeat("z", 20) + "日x",
		"last column":             "\x1b[?7l\x1b[1;20H日",
		"two at the margin":       "\x1b[?7l\x1b[1;19H日本",
		"cup then ascii":          "\x1b[?7l\x1b[1;19H日\x1b[1;20Hx",
		"emoji":                   "\x1b[?7l\x1b[31m" + strings.Repeat("z", 19) + "😀q",
		"next line":               "\x1b[?7l" + z + "日本x\r\n" + z + "日本\r\nx",
		"autowrap on for compare": z + "日本x",
	})
}

// hugeParamStreams carry CSI and DCS parameters past 2^31 - 1. xterm.js
// clamps every parameter to 0x7FFFFFFF; x/ansi's parser keeps 31 bits and
// its sub-parameter flag in the bits above, so the model moved one column
// for CSI 2147483648 C, went home for CSI 4294967297;3 H, and read 2^31 - 1
// itself as a missing parameter.
var hugeParamStreams = map[string]string{
	"cuf 2^31":               "ab\x1b[2147483648Cx",
	"cuf 2^31-1":             "ab\x1b[2147483647Cx",
	"cuf 2^31-2":             "ab\x1b[2147483646Cx",
	"cuf eleven digits":      "ab\x1b[99999999999Cx",
	"cuf leading zeros":      "ab\x1b[0000000000000000000005Cx",
	"cup 2^32+1":             "ab\x1b[4294967297;3Hx",
	"cup column huge":        "ab\x1b[2;99999999999999999999Hx",
	"sgr 256 colour huge":    "a\x1b[38;5;4294967297mb",
	"sgr 256 colour 2^31-1":  "a\x1b[48;5;2147483647mb",
	"sgr 256 colour 2^31-2":  "a\x1b[48;5;2147483646mb",
	"sgr unknown huge first": "a\x1b[99999999999;1mb",
	"sgr underline sub huge": "a\x1b[4:99999999999mb\x1b[4:3mc",
	"sgr rgb huge":           "a\x1b[38:2::99999999999:7:8mb",
	"ech huge":               "abcdef\x1b[1G\x1b[2147483650Xz",
	"private mode huge":      "a\x1b[?99999999999hb\x1b[?25lc",
	"c0 inside digits":       "ab\x1b[2147483\x01648Cx",
	"dcs huge":               "a\x1bP99999999999;1$qm\x1b\\b",
	"next sequence resets":   "a\x1b[38;5;99999999999mb\x1b[38;5;3mc",
}

func TestHugeParametersMatchXterm(t *testing.T) {
	compareWritesWithXterm(t, hugeParamStreams)
}

// TestHugeParameterAcrossWrites: a parameter's digits split between two
// writes (two reads of the PTY) are one parameter, clamped as in one write
// (which TestHugeParametersMatchXterm holds to xterm.js): the screen, the
// cursor and what a viewer attaching is sent are the same. (The xterm.js
// comparison itself cannot stop between the writes: a redraw holds no
// half-read sequence, and the daemon takes none there.)
func TestHugeParameterAcrossWrites(t *testing.T) {
	for _, parts := range [][]string{
		{"ab\x1b[21474", "83649Cx"},
		{"ab\x1b[3;", "99999999999Hx"},
		{"ab\x1b[38;5;4294", "967297mc"},
		{"ab\x1b[2147483", "\x01", "648Cx"},
	} {
		whole, split := NewEmulator(20, 6), NewEmulator(20, 6)
		_, _ = whole.Write([]byte(strings.Join(parts, "")))
		for _, p := range parts {
			_, _ = split.Write([]byte(p))
		}
		a, err := whole.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		b, err := split.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Screen(), b.Screen()) {
			t.Errorf("%q written in parts shows %q, in one write %q", parts, b.Screen(), a.Screen())
		}
	}
}

// sequenceEndStreams end sequences as xterm.js does where x/ansi did
// otherwise: a CAN or SUB that aborts a string is executed, so a combining
// mark after it does not join the character before the string; an escape
// or control sequence with two intermediates matches no handler (x/ansi kept
// the last, so ESC * + A designated a character set).
var sequenceEndStreams = map[string]string{
	"sub ends a dcs":        "n\x1bPd\x1a\u0301",
	"can ends a dcs":        "n\x1bPd\x18\u0301",
	"sub ends an osc":       "n\x1b]0;x\x1a\u0301",
	"sub ends an apc":       "n\x1b_x\x1a\u0301",
	"c1 dcs ended by sub":   "n\u0090d\x1a\u0301",
	"st ends a dcs":         "n\x1bPd\x1b\\\u0301",
	"sub in a csi":          "n\x1b[1\x1a\u0301",
	"esc two intermediates": "\x1b*+A\x0e\x1b\"+C\x1b!)Z\x0f@#",
	"csi two intermediates": "ab\x1b[2 $@cd\x1b[1\"$q",
	"dcs two intermediates": "\x1bP+$qr\x1b\\x",
	"unknown set kept":      "\x1b(K[\x1b([[\x1b(u[\x1b)=\x0e\x1b)h[\x1b)B[\x0f\x1b(B[",
}

// TestSequenceEndsMatchXterm checks sequenceEndStreams against xterm.js.
func TestSequenceEndsMatchXterm(t *testing.T) {
	compareWritesWithXterm(t, sequenceEndStreams)
}

// resetStreams are DECSTR (CSI ! p) after modes it keeps in xterm.js:
// mouse tracking and its encoding (xterm.js's mouse service, not its core
// modes) and LNM (its convertEol option), which the model reset; RIS, which
// keeps LNM too; and DECALN, whose cells have fresh extended attributes and
// whose rows under origin mode run past the screen's last line.
var resetStreams = map[string]string{
	"mouse tracking":  "\x1b[?1000h\x1b[!p",
	"mouse encoding":  "\x1b[?1003h\x1b[?1006h\x1b[!p",
	"lnm":             "ab\x1b[20h\x1b[!p\ncd\x1b[20l\x1b[!p\nef",
	"focus is reset":  "\x1b[?1004h\x1b[?2004h\x1b[?1h\x1b[!p",
	"ris resets mice": "\x1b[?1003h\x1b[?1006h\x1bc",
	"ris keeps lnm":   "2\x1b[20h\x1bca\nb",
	"decaln, link":    "\x1b]8;;/\x07\x1b7\x1b[4m\x1b8\x1b#8",
	// DECALN under origin mode starts at the region's top and fills as many
	// rows as the screen has: past the last line xterm.js's list of lines
	// wraps to its first on the alternate screen (always full)
	"decaln, origin, alt":    "\x1b[?1049h\x1b[?6h\x1b[3r\x1b#8",
	"decaln, origin, normal": "\x1b[?6h\x1b[3r\x1b#8",
	// and on the normal screen once its history is full, to the oldest lines
	"decaln, origin, full history": strings.Repeat("x\r\n", 1010) + "\x1b[?6h\x1b[3r\x1b#8",
}

// TestResetsAndAlignmentMatchXterm checks resetStreams against xterm.js.
func TestResetsAndAlignmentMatchXterm(t *testing.T) {
	compareWritesWithXterm(t, resetStreams)
}
