package terminal

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzEmulatorRedraw feeds arbitrary output, with resizes, and checks that
// nothing panics or hangs and that the redraw reproduces the screen in
// fresh and dirty emulators. A 0xFF byte (never in UTF-8) followed by two
// bytes is a resize to 2+a%60 columns and 1+b%30 rows.
func FuzzEmulatorRedraw(f *testing.F) {
	for _, s := range []string{
		spinnerStream()[:400], altScreenStream(), colourStream(), modesStream(), scrollRegionStream(),
		"\x1b]0;" + claudeTitle + "\x07x", dirtyStream, "\x1b[6n\x1b[c", "\x1b#8", "\x1b[?69h\x1b[2;5s",
		"\x1b[01m00000000000\x1b7\x1b[0m\x1b[2m", "0\x8d🏽0",
		"0123456789012345678901234567890123456789\r\n日本語テキスト日本語テキスト日本語\xff\x07\x03abc\xff\x30\x05",
		"\x1b[?1049h" + strings.Repeat("日x", 20) + "\xff\x05\x02\x1b[5P\xff\x20\x06",
		// cursors saved past the line's end: a zero-width character at the pending wrap, a resize
		strings.Repeat("x", 20) + "\x03\u200b\x1b7\r\n", "\xff\x28\x05" + strings.Repeat("y", 30) + "\x1b7\xff\x0a\x05",
		// DECSCA and selective erase; a DECRC that leaves the extended attributes unused
		"ab\x1b[1\"q日P\x1b[0\"qq\x1b[1;2H\x1b[?K\x1b[?J", "\x1b[4:2m\x1b7\x1b[24m\x1b]8;;http://x/\x07\x1b[4:3ma\x1b8b\x1b[59mc\x1b7",
		// a pen a DECRC left hiding a link at a pending wrap; a link without an id wrapped, left open
		"\x1b7\x1b]8;;http://x/\x07\x1b8" + strings.Repeat("q", 20), "\x1b]8;;http://x/\x07" + strings.Repeat("ab", 25) + "\r\n日",
		// C1 controls sent as UTF-8; sequences xterm.js drops (ignored, cut by a character)
		"a\xc2\x9b31mred\xc2\x9d0;t\xc2\x9cb\xc2\x90q\xc2\x9c\xc2\x88\x1b]0;a\xc2\x9b2Jx",
		"ab\x1b[3<1mc\x1b[$31md\x1b[2\xc3\xa9Je\x1b_\xe6\x97\xa5f\x1bP\x1b[31mg\x1bP1$2qh\x1b\\\x1b[1<\x01\xc2\x9b4mi\x7f\x1b[2b",
		// DECALN with extended attributes; tab stops at column 0; a wide character at the margin without autowrap
		"\x1b]8;;http://x/\x07\x1b[4:3;58;5;2m\x1b#8\x1b[0g\x1bH\x1b[3g\x1b[1G\x1bH\x1b[9G\x1b[2Z\tx",
		"\x1b[?7l" + strings.Repeat("z", 18) + "日本x\xff\x10\x04" + strings.Repeat("y", 16) + "日\x80本\u0301q",
		// OSC strings as xterm.js reads them: identifiers that are not digits or wrap, no payload
		"\x1b]2;a\x07\x1b]2x;t\x07\x1b]18446744073709551618;u\x07\x1b]2\x07\x1b]8;id=1\x07a\x1b]8\x07\x1b]1;\xe2\x9c\xb3\x1b\\b",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8192 {
			return
		}
		src := newTerm(20, 6)
		defer src.close()
		for len(data) > 0 {
			i := bytes.IndexByte(data, 0xFF)
			if i < 0 {
				src.write(data)
				break
			}
			src.write(data[:i])
			data = data[i+1:]
			if len(data) >= 2 {
				src.resize(2+int(data[0])%60, 1+int(data[1])%30)
				data = data[2:]
			}
		}
		checkRedraw(t, src)
	})
}
