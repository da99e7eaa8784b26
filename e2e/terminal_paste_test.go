package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tabbridge/tabbridge/server/servertest"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// pasteEventJS pastes text into the terminal as the browser does when the
// person presses Ctrl+V: a paste event, carrying the clipboard's text, on
// the element that has the keyboard (xterm.js's textarea).
func pasteEventJS(text string) string {
	return `(() => { const dt = new DataTransfer(); dt.setData('text/plain', ` + jsString(text) + `);
  window.__term.textarea.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true })); })()`
}

// TestPastedEndOfPasteMarkerTypesNothing: in real Chromium, a program that
// asked for bracketed paste (a shell does) receives what the person pastes
// as one paste, even when the clipboard holds the end-of-paste marker
// (ESC [201~) followed by a command. xterm.js sends pasted text as it is,
// so the marker ended the paste and the command after it reached the
// program as typed, run at the next CR. The page takes the control
// characters out (as xterm does) and says so.
func TestPastedEndOfPasteMarkerTypesNothing(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	clean := "echo safe[201~touch pwned\r"
	want := "\x1b[200~" + clean + "\x1b[201~"
	got := filepath.Join(t.TempDir(), "read")
	// The program reads exactly what a single clean paste is, into a file.
	id := m.start(80, 24, "sh", "-c", fmt.Sprintf(`stty raw -echo && printf '\033[?2004hREAD''Y\r\n' && head -c %d > '%s' && printf 'DON''E\r\n' && exec sleep 600`, len(want), got))
	ctx := typingTerminal(t, env, "ada@example.com", id)
	waitScreen(t, ctx, "the program's screen", "READY")
	if on := get(t, ctx, "bracketed paste", chromedp.Evaluate[bool](`window.__term.modes.bracketedPasteMode`)); !on {
		t.Fatal("the viewer is not in bracketed paste mode, which the program set")
	}

	run(t, ctx, "paste", chromedp.Evaluate[chromedp.Void](pasteEventJS("echo safe\x1b[201~touch pwned\r")))
	waitScreen(t, ctx, "the program read the paste", "DONE")
	read, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read, []byte(want)) {
		t.Fatalf("the program read %q, want the paste whole and bracketed once: %q", read, want)
	}
	waitNotice(t, ctx, "the cleaned paste", "Pasted without 1 control character")
}

// TestProgramCannotTypeThroughQueries: in real Chromium, a program that
// sets its title to a command and asks for it back (CSI 21 t), asks to
// read the clipboard (OSC 52), and asks for a colour and the device
// attributes, gets only the colour and the attributes, once each, from
// the daemon: nothing it chose comes back as typed input, and the
// person's next key follows them directly.
func TestProgramCannotTypeThroughQueries(t *testing.T) {
	env := servertest.Start(t, storetest.SQLite, nil)
	person := env.Person(t, "ada@example.com")
	m := connectMachine(t, env, person, "laptop")
	replies := "\x1b]10;rgb:e6e6/e8e8/ebeb\x1b\\" + "\x1b[?1;2c"
	want := replies + "Z"
	got := filepath.Join(t.TempDir(), "read")
	asks := `\033]2;touch pwned\r\033\\\033]1;touch pwned\r\033\\\033[21t\033[20t\033]52;c;?\033\\\033]10;?\033\\\033[c`
	// The program reads the replies' length, then one byte more: the
	// person's key, typed once the replies were read, so anything else that
	// came as input (a title sent back) shows in one or the other.
	id := m.start(80, 24, "sh", "-c", fmt.Sprintf(`stty raw -echo && printf 'READ''Y\r\n' && printf '%s' && head -c %d > '%s' && printf 'DON''E\r\n' && head -c 1 >> '%s' && printf 'FINISH''ED\r\n' && exec sleep 600`, asks, len(replies), got, got))
	ctx := typingTerminal(t, env, "ada@example.com", id)
	waitScreen(t, ctx, "the program read the replies", "DONE")
	run(t, ctx, "the person's key", chromedp.Evaluate[chromedp.Void](`window.__term.paste('Z')`))
	waitScreen(t, ctx, "the program read the key", "FINISHED")
	read, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(read) != want {
		t.Fatalf("the program read %q, want the colour and the attributes, then the person's key: %q", read, want)
	}
}
