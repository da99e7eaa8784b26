package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// attachCuts is how many points through each recorded program the corpus
// test attaches at, besides its end.
const attachCuts = 24

// TestRedrawMatchesXterm compares the attach payload of every stream in the
// corpus (testdata/xterm: recorded from real programs, named
// NAME-COLSxROWS.bin, each whole and cut at attachCuts points, and the
// package's own synthetic streams) with xterm.js fed the stream.
func TestRedrawMatchesXterm(t *testing.T) {
	var names []string
	var cols, rows []int
	var streams [][]byte
	add := func(name string, c, r int, s []byte) {
		names, cols, rows, streams = append(names, name), append(cols, c), append(rows, r), append(streams, s)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "xterm", "*.bin"))
	for _, f := range files {
		c, r, ok := sizeFromName(f)
		if !ok {
			t.Fatalf("%s: name it NAME-COLSxROWS.bin", f)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		add(filepath.Base(f), c, r, data)
		// and as a viewer attaching while the program runs finds it: cut
		// at ground points through the recording (as the session cuts)
		last := 0
		for k := 1; k < attachCuts; k++ {
			if _, g := NewCutter().Scan(data[:len(data)*k/attachCuts]); g > last {
				add(fmt.Sprintf("%s at byte %d", filepath.Base(f), g), c, r, data[:g])
				last = g
			}
		}
	}
	for name, s := range map[string]string{
		"spinner": spinnerStream(), "alt screen": altScreenStream(), "colours": colourStream(),
		"modes": modesStream(), "scroll region": scrollRegionStream(), "dirty": dirtyStream,
		"claude title":     "\x1b]0;" + claudeTitle + "\x07x",
		"wide at margin":   strings.Repeat("z", 18) + "日after",
		"wide last col":    strings.Repeat("z", 19) + "日x",
		"emoji columns":    "✅ done\x1b[1;10Hx😀y\x1b[2;1H😀\x1b[2;5Hz",
		"erase at wrap":    "\x1b[7m" + strings.Repeat(" ", 20) + "\x1b[K\x1b[0m\r\n",
		"clear then more":  "a\r\nb\r\nc\x1b[2Jd",
		"partial region":   "1\r\n2\r\n3\r\n4\r\n5\r\n6\x1b[2;4r\x1b[4;1H\n\n\nx",
		"bold faint":       "\x1b[01m00000000000\x1b7\x1b[0m\x1b[2m",
		"c1 then emoji":    "0\x8d🏽0",
		"broken utf-8":     "\xe6\x1b[31m~W\x1b[m\xa5 ok \xf0\x9f\x98 x \xed\xa0\x80 y \xef\xbb\xbf z \xc0\xaf \xff\xbf!",
		"lone c1 st":       "\x1b]2;title\x9cmore\x07after",
		"decrc then leave": "\x1b[?47h\x1b(0\x1b[2;3H\x1b7\x1b(B\x1b8\x1b[?47lqqq",
		"sgr sub past six": "00000000000000000\x1b[48;1;0;0;:m\x1b[38;5;1;2:3:4:5mx\x1b[38;2;1;2;3:4:5mx",
		"ich splits wide":  "ab日本cd\x1b[1;4H\x1b[@\r\n\x1b[31m日本語\x1b[44m\x1b[1;5H\x1b[2;5H\x1b[@x\r\n\x1b[0m😀✅z\x1b[3;4H\x1b[2@\x1b[3;2H\x1b[@",
		"rep":              "ab\x1b[3bc|\x1b[22b\x1b[31m|\x1b[5b\x1b[m\r\nq\x1b[b\x1b[0b 日\x1b[2b\r\ne\u0301\x1b[3b\x1b[40b",
		"rep mid line":     "0123456789\x1b[1;3Hx\x1b[2b\r\n\x1b[2;20Hz\x1b[b\x1b[2b\x03\u200b\x1b[b",
		// SGR 59 sets xterm.js's underline colour to RGB white (it stores -1 in 26 bits)
		"sgr 59": "\x1b[4:3;58;5;196ma\x1b[59mb\x1b[24mc\x1b[4md\x1b]8;;http://x/\x07e\x1b[0mf\x1b[59;4mg\x1b]8;;\x07\x1b[4;59m",
		// DECSCA protects cells from DECSED/DECSEL (not from ED, EL, ECH);
		// SGR 0 ends it, DECSC saves it; a wide character's halves
		"protected": "one two three\r\n\x1b[1\"qPROT\x1b[0\"q free \x1b[2\"qm\x1b[1\"q日\x1b[m本\x1b[1\"q\x1b7\x1b[0\"qz\r\n\x1b8\x1b[2;1Hp\x1b[1;5H\x1b[?K\x1b[2;3H\x1b[?1K\x1b[3;1H\x1b[1\"qkeep\x1b[0\"q\x1b[1;1H\x1b[?J\x1b[2;11H\x1b[?K\x1b[1\"q",
		// a DECRC restores xterm.js's HAS_EXTENDED with the background: the
		// link and underline style stay in the pen, unused, until an SGR
		// 0, 4, 24, 59 or OSC 8 sets it again (and a style then underlines
		// without the flag)
		"decrc and links": "\x1b7\x1b]8;;http://x/\x07\x1b[4:3;58;5;9ma\x1b8b\x1b[59mc\x1b[0md\x1b]8;;\x07\x1b[4m\x1b7\x1b[24m\x1b]8;id=2;http://y/\x07\x1b8e\x1b[4:0mf\x1b7\x1b]8;;\x07\x1b8g",
		// colours set (OSC 4, 10–12) and restored (104, 110–112), kept
		// through RIS, in xterm.js's forms of colour spec
		"palette": "\x1b]4;1;rgb:ff/00/00;2;#0f0;300;#fff;3;red;9;rgb:f/8/0;x;#111\x07\x1b]104;2\x07\x1b]10;#111;#222\x07\x1b]12;rgb:1234/5678/9abc\x07\x1b]111\x07\x1b]4;20;#123456789abc;21;#1234567\x07x\x1bc\x1b]4;5;#ABCDEF;6;RGB:1/2/3\x07\x1b]110\x07\x1b]104\x07\x1b]4;7;#fff\x1b\\y",
		// C0 controls inside escape sequences run there and the sequence
		// goes on (x/ansi added them to the command: CSI 2 ^A T was SU)
		"c0 inside sequences": "1\r\n2\r\n3\x1b[2\x01T\x1b[?4\x00T\x1b[2;\x083Hx\x1b(\x010q\x1b(B\x1b[\r\n1;31my\x1b[0m\x1bP1\x01;2|z\x1b\\w\x1b[?25\x07l",
		// a DECRC that leaves the saved charset in use, then a pending wrap,
		// with a link open: the wrap's cell written again took the link
		"decrc charset link wrap": "\x1b(0\x1b[?47h\x1b8\x1b]8;;http://a/\x07" + strings.Repeat("x", 20) + "\x1b[K" + strings.Repeat("x", 20) + "\x1b[K\x1b[2K",
		// the alternate screen's saved cursor, saved with DEC graphics in
		// use, was written before the rows and left them in DEC graphics
		"alt saved charset": "xxxx lqk\x1b[?47h\x1b(0\x1b7\x1b[?47l",
		"underline kinds":   "\x1b[4:2mdbl\x1b[4:3;58:2::1:2:3mcurly\x1b[4:5;58;5;9mdash\x1b[21m2\x1b[24m\x1b]8;id=a;http://a/\x1b\\lnk\x1b]8;;\x1b\\",
	} {
		add(name, 20, 6, []byte(s))
	}
	for name, s := range hugeCountStreams() {
		add(name, 20, 6, []byte(s))
	}
	if failed := compareWithXterm(t, names, cols, rows, streams); failed > 0 {
		t.Logf("%d of %d streams differ from xterm.js", failed, len(streams))
	}
}

// sizeFromName reads COLSxROWS from NAME-COLSxROWS.bin.
func sizeFromName(path string) (cols, rows int, ok bool) {
	base := strings.TrimSuffix(filepath.Base(path), ".bin")
	i := strings.LastIndexByte(base, '-')
	c, r, found := strings.Cut(base[i+1:], "x")
	if i < 0 || !found {
		return 0, 0, false
	}
	cols, err1 := strconv.Atoi(c)
	rows, err2 := strconv.Atoi(r)
	return cols, rows, err1 == nil && err2 == nil && cols > 0 && rows > 0
}
