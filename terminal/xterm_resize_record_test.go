//go:build !windows

package terminal

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordXtermResizeCorpus records the resize corpus from real programs
// in a real PTY (TABBRIDGE_RECORD_XTERM=1 to run it): each is driven by keys
// and resized (Session.Resize: the PTY's size and SIGWINCH, as a viewer's
// resize reaches it) once its screen shows what a person would wait for;
// the output between resizes and the resizes are saved as
// testdata/xterm/resize/NAME.json.
func TestRecordXtermResizeCorpus(t *testing.T) {
	if os.Getenv("TABBRIDGE_RECORD_XTERM") == "" {
		t.Skip("set TABBRIDGE_RECORD_XTERM=1 to record the corpus again")
	}
	type step = sweepStep // wait (a regexp over the whole output; "" waits a person's pace), keys, then a resize
	text := filepath.Join(t.TempDir(), "text")
	long := strings.Repeat("a long line that wraps at any width, ", 6)
	if err := os.WriteFile(text, []byte("plain line\n"+long+"\n日本語のテキスト and more 日本語のテキスト and more\n✅ done 😀 emoji\n\tindented\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shell := []string{"sh", "-c", `PS1='$ ' exec bash --norc --noprofile -i`}
	progs := []struct {
		name       string
		cols, rows int
		argv       []string
		steps      []step
	}{
		{"shell-long-lines", 80, 24, shell, []step{
			{wait: `\$ `, keys: `for i in $(seq 1 40); do printf 'line %02d: %s\n' $i "$(printf '%0150d' $i)"; done; echo MARK1` + "\r"},
			{wait: `MARK1\r\n`, cols: 50, rows: 20},
			{keys: "echo MARK2\r"}, {wait: `MARK2\r\n`, cols: 132, rows: 30},
			{keys: "echo MARK3\r"}, {wait: `MARK3\r\n`, cols: 33, rows: 10},
			{keys: "printf '日本語テキスト%.0s' $(seq 1 12); echo; echo MARK4\r"}, {wait: `MARK4\r\n`, cols: 100, rows: 40},
			{keys: "echo MARK5\r"}, {wait: `MARK5\r\n`, keys: "exit\r"},
		}},
		{"ls-resized", 100, 30, shell, []step{
			{wait: `\$ `, keys: "ls --color=always -la /usr/bin | head -60; ls --color=always /etc; echo MARK1\r"},
			{wait: `MARK1\r\n`, cols: 60, rows: 20},
			{keys: "ls --color=always /usr/lib | head -40; echo MARK2\r"}, {wait: `MARK2\r\n`, cols: 140, rows: 35},
			{keys: "echo MARK3\r"}, {wait: `MARK3\r\n`, cols: 45, rows: 15},
			{keys: "echo MARK4\r"}, {wait: `MARK4\r\n`, keys: "exit\r"},
		}},
		{"vim-resized", 80, 24, []string{"vim", "-u", "NONE", "-N", "-i", "NONE", text}, []step{
			{wait: `plain line`, keys: "Go" + long + "日本語 ✅ wide\x1b"},
			{wait: `wide`, cols: 50, rows: 15}, {cols: 120, rows: 35}, {keys: ":set nu\r"},
			{cols: 40, rows: 10}, {keys: ":vsplit\r"}, {cols: 90, rows: 28}, {keys: ":q!\r"}, {keys: ":q!\r"},
		}},
	}
	utf8 := "LANG=C.UTF-8 LC_ALL=C.UTF-8 "
	// whole agent sessions, against stand-in model APIs (standin_test.go)
	claude, codex := standinAgents(t, standinModelAPI(t))
	session := func(ready string) []step {
		return []step{{wait: ready, keys: "say hello in a list"}, {keys: "\r"},
			{wait: `Done\.`, cols: 70, rows: 20},
			{keys: "and now a much longer prompt that wraps around the narrow screen at least once, yes, 日本語 too"}, {keys: "\r"},
			{wait: `(?s)Done\..*Done\.`, cols: 120, rows: 35},
			{keys: "/"}, {keys: "\x1b"}, {keys: "three"}, {keys: "\r"},
			{wait: `(?s)Done\..*Done\..*Done\.`, cols: 45, rows: 14},
			{keys: "\x03"}, {keys: "\x03"}}
	}
	progs = append(progs, []struct {
		name       string
		cols, rows int
		argv       []string
		steps      []step
	}{
		{"codex-resized", 100, 30, []string{"sh", "-c", "command -v codex >/dev/null || exit 0; HOME=$(mktemp -d) exec codex"}, []step{
			{wait: `.`, cols: 70, rows: 20}, {keys: "\x1b[B", cols: 120, rows: 40}, {cols: 45, rows: 15}, {keys: "\x03\x03"}}},
		{"claude-session-resized", 100, 30, []string{"sh", "-c", claude}, session(`shortcuts`)},
		{"codex-session-resized", 100, 30, []string{"sh", "-c", codex}, session(`Ask Codex`)},
		{"htop-resized", 120, 30, []string{"sh", "-c", "command -v htop >/dev/null || exit 0; " + utf8 + "exec htop -d 5"}, []step{
			{wait: `Load`, cols: 80, rows: 24}, {cols: 150, rows: 40}, {cols: 50, rows: 15}, {keys: "q"}}},
		{"mc-resized", 100, 30, []string{"sh", "-c", "command -v mc >/dev/null || exit 0; " + utf8 + "exec mc -u /usr/share /etc"}, []step{
			{wait: `.`, cols: 70, rows: 20}, {keys: "\x1b[B\x1b[B", cols: 130, rows: 40}, {keys: "\t", cols: 50, rows: 14}, {keys: "\x1b0"}, {keys: "\r"}}},
		{"tmux-resized", 90, 24, []string{"sh", "-c", utf8 + "exec tmux -L tabbridge-record -f /dev/null new-session \"sh -c 'for i in \\$(seq 1 40); do echo line \\$i 日本語; done; sleep 30'\""}, []step{
			{wait: `line 40`, keys: "\x02\"", cols: 60, rows: 16}, {keys: "ls /etc\r", cols: 120, rows: 30}, {keys: "\x02%", cols: 40, rows: 10}, {keys: "\x02d"}}},
	}...)
	dir := filepath.Join("testdata", "xterm", "resize")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			c := newCollector()
			s := start(t, c, p.cols, p.rows, p.argv[0], p.argv[1:]...)
			steps := driveRecording(t, c, s, p.steps, 500*time.Millisecond, 5*time.Second)
			body, _ := json.Marshal(recordedResize{Cols: p.cols, Rows: p.rows, Steps: steps})
			name := filepath.Join(dir, p.name+".json")
			if err := os.WriteFile(name, body, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d steps, %d bytes", name, len(steps), len(body))
		})
	}
}
