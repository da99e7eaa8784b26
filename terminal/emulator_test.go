package terminal

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// claudeTitle is Claude Code's title: "✳" is E2 9C B3, and 0x9C is the C1
// string terminator to x/ansi's parser.
const claudeTitle = "✳ Claude Code"

func TestTitleWithC1ByteInsideUTF8(t *testing.T) {
	for name, seq := range map[string]string{
		"BEL": "\x1b]0;" + claudeTitle + "\x07",
		"ST":  "\x1b]2;" + claudeTitle + "\x1b\\",
		// a lone 0x9C is not UTF-8: xterm.js, fed bytes as the viewer is,
		// drops it and the string goes on (to the BEL)
		"C1": "\x1b]2;" + claudeTitle + "\x9c\x07",
	} {
		t.Run(name, func(t *testing.T) {
			stream := seq + "hello"
			src := feed(40, 5, stream)
			defer src.close()
			if src.title != claudeTitle {
				t.Errorf("title %q, want %q", src.title, claudeTitle)
			}
			if got := screenText(src); got != "hello" {
				t.Errorf("screen %q, want %q", got, "hello")
			}
			checkRedraw(t, src)
		})
	}
}

func TestHyperlinkWithC1ByteInsideUTF8(t *testing.T) {
	src := feed(40, 5, "\x1b]8;;https://example.com/✳\x07star\x1b]8;;\x07")
	defer src.close()
	if got := src.links[src.styles.pens[src.buf.row(0).cells[0].style].link].url; got != "https://example.com/✳" {
		t.Errorf("link %q", got)
	}
	if got := screenText(src); got != "star" {
		t.Errorf("screen %q, want star", got)
	}
}

// TestQueriesNeverBlock feeds more terminal queries than the reply queue
// holds with nobody reading replies (x/vt v0.1.0 deadlocked here).
func TestQueriesNeverBlock(t *testing.T) {
	e := NewEmulator(80, 24)
	defer e.Close()
	queries := strings.Repeat("\x1b[c\x1b[>c\x1b[5n\x1b[6n\x1b]11;?\x07", 100)
	wrote := make(chan error, 1)
	go func() { _, err := e.Write([]byte(queries)); wrote <- err }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Write blocked on query replies")
	}
	select {
	case r := <-e.Replies():
		if string(r) != "\x1b[?1;2c" { // xterm.js's answer
			t.Errorf("first reply %q, want a DA1 answer", r)
		}
	case <-ctx.Done():
		t.Fatal("no reply")
	}
}

func TestHistoryIsCapped(t *testing.T) {
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "\x1b[3%dmline %d\x1b[0m\r\n", i%8, i)
	}
	src := feed(30, 10, b.String())
	defer src.close()
	if n := src.normal.ybase(); n != HistoryLines {
		t.Fatalf("scrollback %d lines, want %d", n, HistoryLines)
	}
	hist := src.history()
	if n := bytes.Count(hist, []byte("\r\n")); n != HistoryLines {
		t.Fatalf("history %d lines, want %d", n, HistoryLines)
	}
	// 3000 lines and a blank one on a 10-row screen: 2991 scrolled off.
	if !bytes.Contains(hist, []byte("line 2990\x1b[0m")) || bytes.Contains(hist, []byte("line 1990\x1b")) {
		t.Errorf("history does not end where the screen begins: ...%q", hist[len(hist)-60:])
	}
	e := NewEmulator(30, 10)
	defer e.Close()
	if _, err := e.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	snap, err := e.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dst := feed(30, 10, string(snap.Attach()))
	defer dst.close()
	if got, want := lineText(dst.normal.at(HistoryLines-1)), "line 2990"; got != want {
		t.Errorf("attached viewer's last history line %q, want %q", got, want)
	}
	if d := observe(src).diff(observe(dst)); len(d) > 0 {
		t.Errorf("attached screen differs: %v", d)
	}
}

func TestResizeThenRedraw(t *testing.T) {
	src := feed(40, 12, altScreenStream())
	defer src.close()
	src.resize(30, 8)
	checkRedraw(t, src)
	src.write([]byte("\x1b[?1049lback on main"))
	checkRedraw(t, src)
}

// lineText is a line's characters with trailing blanks dropped.
func lineText(l *line) string {
	var b strings.Builder
	for x := range l.cells {
		if s := l.text(x); s != "" {
			b.WriteString(s)
		} else if l.cells[x].width != 0 {
			b.WriteByte(' ')
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// screenText is the screen's text, rows joined by newlines, trimmed.
func screenText(t *term) string {
	var rows []string
	for y := range t.rows {
		rows = append(rows, lineText(t.buf.row(y)))
	}
	return strings.TrimSpace(strings.Join(rows, "\n"))
}
