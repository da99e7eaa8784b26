package terminal

import (
	"strings"
	"testing"
)

// oscStreams are OSC strings read as xterm.js's OscParser and OscHandler
// read them (osc.go), each after a first title so that one that must change
// nothing shows it. Before, the model took x/ansi's reading: the leading
// digits of any identifier ("2x;" was OSC 2), an identifier that wrapped
// in an int (18446744073709551618 was OSC 2), the first 64 KiB of a payload
// (a long title or link cut short) and no payload limit; a string without
// ';' set nothing where xterm.js sets an empty title.
var oscStreams = map[string]string{
	"title over 64 KiB":   "\x1b]2;first\x07\x1b]2;" + strings.Repeat("a", 70000) + "\x07X",
	"title at the limit":  "\x1b]2;first\x07\x1b]2;" + strings.Repeat("a", oscPayloadLimit) + "\x07X",
	"title over it":       "\x1b]2;first\x07\x1b]2;" + strings.Repeat("a", oscPayloadLimit+1) + "\x07X",
	"emoji over it":       "\x1b]2;first\x07\x1b]2;" + strings.Repeat("😀", oscPayloadLimit/2) + "a\x07X",
	"link over 64 KiB":    "\x1b]8;;http://x/" + strings.Repeat("b", 70000) + "\x07L\x1b]8;;\x07X",
	"emoji link":          "\x1b]8;;http://x/" + strings.Repeat("😀", 20000) + "\x07L\x1b]8;;\x07X",
	"id not digits":       "\x1b]2;first\x07\x1b]2x;title\x07X",
	"id with a space":     "\x1b]2;first\x07\x1b] 2;t\x07X",
	"id that wraps":       "\x1b]2;first\x07\x1b]18446744073709551618;t\x07X",
	"no id":               "\x1b]2;first\x07\x1b];t\x07X",
	"leading zeros":       "\x1b]002;t\x07X",
	"no payload":          "\x1b]2;first\x07\x1b]2\x07X",
	"no payload, OSC 0":   "\x1b]2;first\x07\x1b]0\x1b\\X",
	"no payload, colours": "\x1b]10\x07\x1b]11\x07\x1b]4\x07\x1b]8\x07X",
	"link without uri":    "\x1b]8\x07L\x1b]8;id=1\x07M",
	"esc ends":            "\x1b]2;first\x07\x1b]2;t\x1bXy\x1b\\Z",
	"can aborts":          "\x1b]2;first\x07\x1b]2;t\x18Z",
	"sub aborts":          "\x1b]2;first\x07\x1b]2;t\x1aZ",
	"icon then title":     "\x1b]1;i\x07\x1b]0;t\x07X",
	"clipboard of 120 KB": "\x1b]52;c;" + strings.Repeat("QUJD", 30000) + "\x07X",
}

// TestOSCMatchesXterm checks OSC strings against xterm.js.
func TestOSCMatchesXterm(t *testing.T) {
	compareWritesWithXterm(t, oscStreams)
}

// TestOSCPayloadsAreNotKept checks what a session holds for OSC strings: a
// clipboard copy or an inline image of megabytes (an identifier the model
// does not act on) keeps no payload, and a long title's buffer is given
// back when its string ends.
func TestOSCPayloadsAreNotKept(t *testing.T) {
	tm := newTerm(20, 6)
	feed := func(s string) {
		for i := 0; i < len(s); i++ {
			tm.stream.feed(s[i], nil)
		}
	}
	feed("\x1b]1337;File=inline=1:" + strings.Repeat("QUJD", 1<<18))
	if c := cap(tm.stream.osc.data); c != 0 {
		t.Errorf("an OSC 1337 of 1 MiB, unfinished, holds %d bytes of payload, want none", c)
	}
	feed("\x07\x1b]2;" + strings.Repeat("t", 1<<20))
	if c := cap(tm.stream.osc.data); c < 1<<20 {
		t.Fatalf("a title of 1 MiB, unfinished, holds %d bytes, want it all", c)
	}
	feed("\x07")
	if tm.title != strings.Repeat("t", 1<<20) {
		t.Errorf("title of %d bytes, want 1 MiB", len(tm.title))
	}
	if c := cap(tm.stream.osc.data); c > oscKeepCap {
		t.Errorf("after the title's end the session holds %d bytes of buffer, want at most %d", c, oscKeepCap)
	}
}
