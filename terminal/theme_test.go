package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestViewerThemeMatchesTerminalJS holds the theme the daemon answers
// colour queries with to the viewer's own: the colours terminal.js gives
// its xterm.js, and the default palette in the xterm.js build it loads.
func TestViewerThemeMatchesTerminalJS(t *testing.T) {
	static := filepath.Join("..", "server", "web", "static")
	js, err := os.ReadFile(filepath.Join(static, "terminal.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`theme: \{([^}]*)\}`).FindSubmatch(js)
	if m == nil {
		t.Fatal("terminal.js: no theme: { ... } in the Terminal options")
	}
	for name, want := range map[string][3]uint8{"foreground": viewerForeground, "background": viewerBackground, "cursor": viewerCursor} {
		v := regexp.MustCompile(name + `: '#([0-9a-fA-F]{6})'`).FindSubmatch(m[1])
		if v == nil {
			t.Errorf("terminal.js's theme sets no %s: the viewer shows xterm.js's default, update theme.go", name)
			continue
		}
		if got := hexRGB(string(v[1])); got != want {
			t.Errorf("terminal.js's theme %s is %x, theme.go has %x", name, got, want)
		}
	}
	if strings.Contains(string(m[1]), "black") || strings.Contains(string(m[1]), "brightBlack") {
		t.Error("terminal.js's theme sets ANSI colours: theme.go's viewerANSI must follow it")
	}
	lib, err := os.ReadFile(filepath.Join(static, "vendor", "xterm", "xterm.js"))
	if err != nil {
		t.Fatal(err)
	}
	ansi := regexp.MustCompile(`toColor\("#2e3436"\)(,[a-z]\.css\.toColor\("#[0-9a-f]{6}"\)){15}`).Find(lib)
	if ansi == nil {
		t.Fatal("the vendored xterm.js has no default ANSI palette starting #2e3436 (a new version?): check viewerANSI")
	}
	for i, h := range regexp.MustCompile(`#([0-9a-f]{6})`).FindAllSubmatch(ansi, -1) {
		if got := hexRGB(string(h[1])); got != viewerColor(i) {
			t.Errorf("ANSI colour %d: xterm.js has %x, theme.go %x", i, got, viewerColor(i))
		}
	}
	if !strings.Contains(string(lib), "t=[0,95,135,175,215,255];for(let i=0;i<216;i++)") ||
		!strings.Contains(string(lib), "for(let t=0;t<24;t++){const i=8+10*t;") {
		t.Error("the vendored xterm.js builds its 256 colours another way: check viewerColor")
	}
}

func hexRGB(s string) [3]uint8 {
	var c [3]uint8
	for i := range 3 {
		v, _ := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		c[i] = uint8(v)
	}
	return c
}

// TestColorQueriesAnswerViewerTheme checks the answers to OSC 4, 10, 11 and
// 12 queries, in order with the colours set beside them, in the browser
// xterm.js's form (ESC ] ident ; rgb:RRRR/GGGG/BBBB ESC \).
func TestColorQueriesAnswerViewerTheme(t *testing.T) {
	rgb := func(c [3]uint8) string {
		return fmt.Sprintf("rgb:%02x%02x/%02x%02x/%02x%02x", c[0], c[0], c[1], c[1], c[2], c[2])
	}
	for _, c := range []struct{ stream, want string }{
		{"\x1b]10;?\x07\x1b]11;?\x07\x1b]12;?\x07", "\x1b]10;" + rgb(viewerForeground) + "\x1b\\\x1b]11;" + rgb(viewerBackground) + "\x1b\\\x1b]12;" + rgb(viewerCursor) + "\x1b\\"},
		{"\x1b]10;?;?\x1b\\", "\x1b]10;rgb:e6e6/e8e8/ebeb\x1b\\\x1b]11;rgb:0f0f/1111/1515\x1b\\"},
		{"\x1b]11;#123456\x07\x1b]11;?\x07\x1b]111\x07\x1b]11;?\x07", "\x1b]11;rgb:1212/3434/5656\x1b\\\x1b]11;rgb:0f0f/1111/1515\x1b\\"},
		{"\x1b]4;1;?;1;#ff8000;1;?;196;?;244;?;16;?;231;?\x07", "\x1b]4;1;rgb:cccc/0000/0000\x1b\\\x1b]4;1;rgb:ffff/8080/0000\x1b\\" +
			"\x1b]4;196;rgb:ffff/0000/0000\x1b\\\x1b]4;244;rgb:8080/8080/8080\x1b\\\x1b]4;16;rgb:0000/0000/0000\x1b\\\x1b]4;231;rgb:ffff/ffff/ffff\x1b\\"},
		{"\x1b]4;256;?;x;?\x07", ""}, // no such entry: no answer, as in xterm.js
	} {
		m := newTerm(20, 6)
		m.write([]byte(c.stream))
		var got strings.Builder
		for len(m.replies) > 0 {
			got.Write(<-m.replies)
		}
		m.close()
		if got.String() != c.want {
			t.Errorf("%q answered\n  %q\nwant %q", c.stream, got.String(), c.want)
		}
	}
}
