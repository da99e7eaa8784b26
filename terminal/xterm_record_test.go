//go:build !windows

package terminal

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestRecordXtermCorpus records the differential tests' corpus from real
// programs in a real PTY (TABBRIDGE_RECORD_XTERM=1 to run it): each
// program is driven by keys sent once its screen shows what a person would
// wait for, and its output bytes are saved as testdata/xterm/NAME-COLSxROWS.bin.
func TestRecordXtermCorpus(t *testing.T) {
	if os.Getenv("TABBRIDGE_RECORD_XTERM") == "" {
		t.Skip("set TABBRIDGE_RECORD_XTERM=1 to record the corpus again")
	}
	type step struct {
		wait string // regexp the output must match before keys
		keys string
	}
	text := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(text, []byte("plain line\n日本語のテキスト and more\n✅ done 😀 emoji\n\tindented\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	progs := []struct {
		name       string
		cols, rows int
		argv       []string
		steps      []step
	}{
		{"ls-color", 100, 30, []string{"sh", "-c", "ls --color=always -la /usr/bin | head -80; ls --color=always /etc"}, nil},
		{"vim", 80, 24, []string{"vim", "-u", "NONE", "-N", "-i", "NONE", text}, []step{
			{`plain line`, "Go日本 ✅ wide\x1b"}, {`wide`, ":set nu\r"}, {`  1 `, "ggdd"}, {`.`, ":vsplit\r"},
			{`\|`, ":q!\r"}, {`.`, ":q!\r"}}},
		{"less", 80, 24, []string{"less", "-R", "/etc/services"}, []step{
			{`services`, " "}, {`.`, " "}, {`.`, "/tcp\r"}, {`.`, "G"}, {`END|\(END\)`, "q"}}},
		{"top", 120, 30, []string{"top", "-d", "0.2", "-n", "4"}, nil},
		{"htop", 120, 30, []string{"sh", "-c", "command -v htop >/dev/null || exit 0; exec htop -d 2"}, []step{{`F10|Quit`, "q"}}},
		{"spinner", 60, 10, []string{"sh", "-c", `printf 'building\r\n'; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do printf '\r\033[K⠋ step %s\033[1;32m ok\033[0m' $i; sleep 0.01; done; printf '\r\n'`}, nil},
		{"cjk-margins", 21, 8, []string{"sh", "-c", `printf 'zzzzzzzzzzzzzzzzzzzz日after\r\n日本語日本語日本語日本語\r\n😀😀😀😀😀😀😀😀😀😀😀\r\ná̂ é ñ\r\n'`}, nil},
		{"scroll-regions", 40, 12, []string{"sh", "-c", `printf 'top\r\n\033[3;9r\033[3H'; i=0; while [ $i -lt 30 ]; do printf 'line %s\r\n' $i; i=$((i+1)); done; printf '\033[r\033[12Hbottom\033[1;4r\033[4H\n\n\nafter\033[r'`}, nil},
		// the agents people run, where installed (npm i -g @anthropic-ai/claude-code @openai/codex);
		// with no network and a fresh HOME they draw their first screens and an error
		{"claude", 100, 30, []string{"sh", "-c", "command -v claude >/dev/null || exit 0; HOME=$(mktemp -d) exec claude"}, []step{
			{`.`, "\x1b[B"}, {`.`, "\r"}, {`.`, "\x03"}, {`.`, "\x03"}}},
		{"codex", 100, 30, []string{"sh", "-c", "command -v codex >/dev/null || exit 0; HOME=$(mktemp -d) exec codex"}, []step{
			{`.`, "\x1b[B"}, {`.`, "\x1b[B"}, {`.`, "\x03"}, {`.`, "\x03"}}},
		{"mc", 100, 30, []string{"sh", "-c", "command -v mc >/dev/null || exit 0; exec mc -u /usr/share /etc"}, []step{
			{`.`, "\x1b[B\x1b[B\x1b[B"}, {`.`, "\t"}, {`.`, "\x1b[B\x1b[B"}, {`.`, "\x1b0"}, {`.`, "\r"}}},
		{"dialog", 70, 20, []string{"sh", "-c", "command -v dialog >/dev/null || exit 0; exec dialog --menu 'Pick one' 15 50 5 a 'Apple 日本' b Banana c Cherry"}, []step{
			{`Pick`, "\x1b[B"}, {`.`, "\x1b[B"}, {`.`, "\r"}}},
		{"tmux", 90, 24, []string{"tmux", "-L", "tabbridge-record", "-f", "/dev/null", "new-session", "sh -c 'printf \"pane one\\n\"; for i in $(seq 1 40); do echo line $i; done; sleep 30'"}, []step{
			{`line 40`, "\x02\""}, {`.`, "echo in second pane\r"}, {`.`, "\x02%"}, {`.`, "ls --color=always /etc | head -30\r"}, {`.`, "\x02d"}}},
		{"alt-screen", 60, 15, []string{"sh", "-c", `printf 'main 1\r\nmain 2\r\n\033[?1049h\033[2J\033[H\033[7m alt title \033[0m\r\nalt body\033[?1049l back\r\n\033[?47hold alt\033[?47l\r\n\033[?1049hstill alt'`}, nil},
	}
	dir := filepath.Join("testdata", "xterm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			c := newCollector()
			s := start(t, c, p.cols, p.rows, p.argv[0], p.argv[1:]...)
			for _, st := range p.steps {
				c.waitFor(t, regexp.MustCompile(st.wait))
				for _, k := range []byte(st.keys) {
					_ = s.Input([]byte{k})
				}
				time.Sleep(300 * time.Millisecond) // a person's pace; the recorder is not a test
			}
			select {
			case <-s.Done():
			case <-time.After(5 * time.Second):
			}
			name := filepath.Join(dir, p.name+"-"+itoa(p.cols)+"x"+itoa(p.rows)+".bin")
			if err := os.WriteFile(name, c.bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d bytes", name, len(c.bytes()))
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
