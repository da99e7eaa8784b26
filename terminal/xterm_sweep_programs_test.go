//go:build !windows

package terminal

// sweepFixture is the shell that makes the files the swept programs open,
// in $D (recordSweep sets it), with HOME beside them.
const sweepFixture = `export HOME=$D/home PATH=$PATH:/usr/games; D=$D/fx
if [ ! -d $D ]; then
mkdir -p $D $HOME; cd $D
printf 'plain line\n日本語のテキスト and more\n✅ done 😀 emoji\n\tindented\nfunc main() {\n\tprintln("hi")\n}\n' > text.go
printf '<html><body><h1>Title</h1><p>Some <b>bold</b> and <a href="b.html">a link</a> 日本語.</p><ul><li>one</li><li>two</li></ul><table border=1><tr><td>a</td><td>b</td></tr></table></body></html>' > a.html
printf '<html><body><p>second page</p></body></html>' > b.html
git init -q repo && cd repo && git config user.email a@b && git config user.name A && seq 1 50 > f && printf '日本語\n' >> f && git add f && git commit -qm one && sed -i 's/^1$/one/; s/^30$/thirty/; s/^45$/forty five/' f && git commit -qam two && sed -i 's/^2$/two/; s/^40$/forty/' f && cd ..
printf 'From a@b Mon Jan  1 00:00:00 2024\nFrom: A <a@b>\nTo: c@d\nSubject: hello 日本\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\nbody line\n\nFrom x@y Mon Jan  1 00:00:00 2024\nFrom: X <x@y>\nSubject: second\n\nsecond body\n' > mbox
fi
cd $D
`

func sweepPrograms() []sweepProgram {
	f := sweepFixture
	return []sweepProgram{
		{"emacs", 80, 24, f + "exec emacs -nw -Q text.go", []sweepStep{
			{wait: `plain`, keys: "\x1b>hello 日本 ✅\r"}, {keys: "\x18" + "2"}, {keys: "\x18o\x1bxlist-buffers\r"},
			{cols: 60, rows: 18}, {keys: "\x0e\x0e\x0e"}, {cols: 100, rows: 30}, {keys: "\x18\x03"}, {keys: "n"}, {keys: "yes\r"}}},
		{"nvim", 80, 24, f + "exec nvim --clean -n text.go", []sweepStep{
			{wait: `plain`, keys: "Go日本 ✅ wide\x1b"}, {keys: ":set nu cursorline\r"}, {keys: ":split\r"}, {cols: 50, rows: 16},
			{keys: ":vsplit\r"}, {cols: 110, rows: 30}, {keys: ":q!\r:q!\r:q!\r"}}},
		{"zsh", 80, 24, f + `exec zsh -f -c 'autoload -U compinit; compinit -u; zstyle ":completion:*" menu select; export PS1="%F{green}%n%f %~ %# " RPS1="%F{red}[%?]%f"; exec zsh -f -i' `, []sweepStep{
			{wait: `# `, keys: "ls /usr/"}, {keys: "\t"}, {keys: "\t"}, {keys: "\t\x1b[B"}, {keys: "\r"}, {keys: "\x15echo 日本語 ✅"}, {cols: 50, rows: 20}, {keys: "\r"}, {keys: "exit\r"}}},
		{"fish", 80, 24, f + "exec fish --no-config", []sweepStep{
			{wait: `# `, keys: "ls /usr/"}, {keys: "\t"}, {keys: "\t"}, {keys: "\x1b[B\x1b[C"}, {keys: "\x03"}, {keys: "echo hello 日本\r"}, {cols: 60, rows: 15}, {keys: "ech"}, {keys: "\x03exit\r"}}},
		{"fzf", 80, 24, f + "seq 1 300 | fzf --reverse --border > /dev/null", []sweepStep{
			{wait: `300`, keys: "1"}, {keys: "2"}, {keys: "\x1b[B\x1b[B"}, {cols: 60, rows: 15}, {keys: "\r"}}},
		{"fzf-height", 80, 24, f + "printf 'before\\n'; seq 1 300 | fzf --height 40% > /dev/null; echo after", []sweepStep{
			{wait: `300`, keys: "1"}, {keys: "\x1b[A\x1b[A"}, {keys: "\r"}}},
		{"tig", 100, 30, f + "cd repo && exec tig", []sweepStep{
			{wait: `one|two`, keys: "j"}, {keys: "\r"}, {keys: "j"}, {cols: 70, rows: 20}, {keys: "q"}, {keys: "s"}, {keys: "q"}, {keys: "q"}}},
		{"vifm", 100, 30, f + "exec vifm -c 'set vicmd=true' /usr/share /etc", []sweepStep{
			{wait: `share`, keys: "jjj"}, {keys: "\t"}, {keys: "jj"}, {cols: 70, rows: 20}, {keys: ":q\r"}}},
		{"nnn", 100, 30, f + "exec nnn -d /usr/share", []sweepStep{
			{wait: `.`, keys: "jjj"}, {keys: "l"}, {keys: "h"}, {cols: 70, rows: 20}, {keys: "q"}}},
		{"ranger", 100, 30, f + "exec ranger --clean /usr/share", []sweepStep{
			{wait: `share`, keys: "jjj"}, {keys: "l"}, {keys: "h"}, {cols: 70, rows: 20}, {keys: "q"}}},
		{"btop", 100, 30, f + "exec btop", []sweepStep{
			{wait: `cpu|CPU`}, {}, {cols: 80, rows: 25}, {}, {keys: "q"}}},
		{"lynx", 80, 24, f + "exec lynx -nocolor a.html", []sweepStep{
			{wait: `Title`, keys: "\x1b[B"}, {keys: "\r"}, {keys: "\x1b[D"}, {cols: 60, rows: 20}, {keys: "q"}, {keys: "y"}}},
		{"elinks", 80, 24, f + "exec elinks -no-connect 1 -no-home 1 a.html", []sweepStep{
			{wait: `Title`, keys: "\x1b[B"}, {keys: "\r"}, {keys: "\x1b[D"}, {cols: 60, rows: 20}, {keys: "q"}, {keys: "y"}}},
		{"irssi", 100, 30, f + "exec irssi --home=$HOME/irssi -n me", []sweepStep{
			{wait: `Irssi`, keys: "/window new hide\r"}, {keys: "hello 日本語 ✅\r"}, {keys: "/help\r"}, {cols: 70, rows: 20}, {keys: "\x1b1"}, {keys: "/quit\r"}}},
		{"weechat", 100, 30, f + "exec weechat -t -r '/set weechat.look.buffer_time_format \"\"'", []sweepStep{
			{wait: `WeeChat`, keys: "hello 日本語\r"}, {keys: "/help\r"}, {cols: 70, rows: 20}, {keys: "/quit\r"}}},
		{"cmatrix", 60, 20, f + "timeout --foreground 1 cmatrix -b -u 2", nil},
		{"sl", 100, 20, f + "exec sl -e", nil},
		{"watch", 80, 20, f + "timeout --foreground 2 watch -d -n 0.3 'date +%N; seq 1 $(( $(date +%N | cut -c1) + 3 )); printf \"日本 ✅ %s\\n\" $(date +%S%N)'", nil},
		{"pv", 80, 10, f + "head -c 3000000 /dev/zero | pv -f -L 2m -s 3000000 -p -t -e -r -b > /dev/null; echo done", nil},
		{"neomutt", 100, 30, f + "exec neomutt -n -F /dev/null -e 'set folder=$D spoolfile=$D/mbox mbox_type=mbox sort=date' -f mbox", []sweepStep{
			{wait: `hello`, keys: "j"}, {keys: "\r"}, {keys: "q"}, {cols: 70, rows: 20}, {keys: "q"}, {keys: "y"}}},
		{"aptitude", 100, 30, f + "exec aptitude", []sweepStep{
			{wait: `Installed|Not Installed|Virtual|Tasks`, keys: "\x1b[B\x1b[B"}, {keys: "\r"}, {keys: "\x1b[B"}, {cols: 80, rows: 24}, {keys: "q"}, {keys: "y"}, {keys: "q"}, {keys: "y"}}},
		{"whiptail", 70, 20, f + "whiptail --menu 'Pick one' 15 50 5 a 'Apple 日本' b Banana c Cherry 2>/dev/null; whiptail --gauge 'wait' 8 40 0 < /dev/null; (for i in 10 40 70 100; do echo $i; sleep 0.1; done) | whiptail --gauge 'Working 日本' 8 50 0", []sweepStep{
			{wait: `Pick`, keys: "\x1b[B"}, {keys: "\x1b[B"}, {keys: "\r"}}},
		{"bat", 80, 24, f + "exec batcat --paging=always --color=always --style=full text.go /etc/services", []sweepStep{
			{wait: `main`, keys: " "}, {keys: " "}, {cols: 60, rows: 15}, {keys: "q"}}},
		{"git-add-p", 80, 24, f + "cd repo && git -c color.ui=always add -p", []sweepStep{
			{wait: `Stage`, keys: "?\r"}, {wait: `(?s)\?.*Stage`, keys: "y\r"}, {keys: "s\r"}, {keys: "n\r"}, {keys: "q\r"}}},
		{"screen", 90, 24, f + "exec screen -q -c /dev/null -S tbsweep sh -c 'seq 1 40; printf \"日本語 ✅\\n\"; sleep 30'", []sweepStep{
			{wait: `40`, keys: "\x01S"}, {keys: "\x01\t"}, {keys: "\x01c"}, {keys: "ls --color=always /etc | head -30\r"}, {cols: 60, rows: 20}, {keys: "\x01\\"}, {keys: "y"}}},
		{"apt-progress", 80, 20, f + `printf 'Reading...\n\n\0337\033[0;19r\0338\033[1A'; for i in $(seq 1 40); do printf 'Unpacking pkg%s (1.0) ...\n' $i; printf '\0337\033[20;0f\033[42m\033[30mProgress: [%3s%%]\033[49m\033[39m [%s]\0338' $((i*5/2)) "$(printf '%*s' $((i)) '' | tr ' ' '#')"; done; printf '\0337\033[0;20r\0338\033[20;0f\033[J'`, nil},
		{"curl-bar", 80, 10, f + "curl -# --limit-rate 3M -o /dev/null file:///usr/bin/git 2>&1; echo", nil},
		{"tput", 80, 24, f + `for c in "smcup" "clear" "cup 3 5" "bold" "setaf 196" "setab 21" "dim" "sitm" "smul" "Smulx 3" "rev" "blink" "invis" "smxx" "sgr0" "ich 3" "dch 2" "il 2" "dl 1" "ech 4" "hpa 10" "vpa 12" "csr 2 10" "ind" "ri" "cvvis" "civis" "cnorm" "rmam" "smam" "smir" "rmir" "smkx" "rmkx" "tbc" "hts" "flash" "rmcup"; do printf '[%s]' "$c"; tput $c; printf 'x日'; done; printf '\n'`, nil},
		{"tabs", 80, 12, f + `tabs 4; printf 'a\tb\tc\td\n'; tabs 1,5,12,30; printf 'a\tb\tc\td\tz\n'; tabs -8; printf '\033[3g\033[5G\033H\033[20G\033H\r\ta\tb\tc\n\033[2;1H\033[10G\033H\033[1;1H\033[0g\033[I\033[I.\033[Z\033[Zx'`, nil},
		{"declrmm", 40, 12, f + `printf 'abcdefghijklmnopqrstuvwxyz0123456789\r\n\033[?69h\033[5;20s\033[3;1Hleft right margins here and a long line that wraps\033[6;1H\033[2@\033[P\033[L\033[M\033[?69l\033[sZ\033[u\r\nend'`, nil},
		{"underline-styles", 60, 12, f + `printf '\033[4mplain\033[4:0m \033[4:2mdouble\033[4:3mcurly\033[4:4mdotted\033[4:5mdashed\033[58;5;196mred\033[58:2::0:255:0mgreen\033[59mnone\033[24m\r\n\033[21mdbl\033[0m \033[53mover\033[55m\r\n\033]8;;https://example.com/a\033\\link one\033]8;;\033\\ \033]8;id=x;http://b/\007b\033]8;;\007\r\n\033[38;2;1;2;3;48;5;200mtrue\033[38:5:100mx\033[m'`, nil},
		{"modes", 60, 12, f + `printf '\033[?2004h\033[?1000h\033[?1002h\033[?1006h\033[?1004h\033[?1049h\0337\033[5;5Hsaved\033[1;2r\033[?6h\033[3Hq\0338x\033[?5h\033[?1l\033[?25l\033[2 q\033[?12h\033]2;title 日本\007\033[>4;1m\033[?1049l\033[?1000l'`, nil},
		{"insdel", 40, 12, f + `seq 1 11 | tr '\n' '\r'; printf '\033[12H'; for i in 1 2 3 4 5 6 7 8 9 10 11; do printf '\033[%d;1H%s\033[K' $i "row $i 日本語 abcdefghijklmnopqrstuvwxyz"; done; printf '\033[3;4H\033[5@\033[4;6H\033[3P\033[5;2H\033[2L\033[8;1H\033[3M\033[2;30H\033[10X\033[4h\033[6;3HINS\033[4l\033[3;10r\033[5;1H\033[4S\033[2T\033[r\033[12;1H'`, nil},
		{"nvim-truecolor", 80, 24, f + "TERM=xterm-direct COLORTERM=truecolor exec nvim --clean -n -c 'set termguicolors spell' -c 'syntax on' -c 'hi SpellBad gui=undercurl guisp=red' text.go", []sweepStep{
			{wait: `plain`, keys: "Gospeling mistaek 日本 ✅\x1b"}, {keys: ":vsplit\r"}, {cols: 60, rows: 18}, {keys: ":q!\r:q!\r"}}},
		{"emacs-truecolor", 80, 24, f + "COLORTERM=truecolor exec emacs -nw -Q text.go", []sweepStep{
			{wait: `plain`, keys: "\x1bxlist-colors-display\r"}, {keys: "\x16"}, {cols: 60, rows: 18}, {keys: "\x18\x03"}, {keys: "n"}, {keys: "yes\r"}}},
		{"tig-log", 100, 30, f + "cd repo && exec tig log", []sweepStep{{wait: `one|two`, keys: "j"}, {keys: "q"}}},
		{"columns", 30, 10, f + `for i in 1 2 3 4 5 6 7 8; do printf 'row%s abcdefghij 日本語 klmnop\r\n' $i; done; printf '\033[2;5H\033[2\047}\033[4;3H\033[3\047~\033[6;2H\033[2 @\033[7;2H\033[ A\033[3;6r\033[4 @\033[r\033[1;1H\033[31m\033[2 A\033[m\033[9;1H'`, nil},
		{"decaln-decstr", 30, 8, f + `printf 'abc\033[31;4m\033[2;5r\033[?6h\033[4h\033#8\033[3;3Hx\033[!pafter\033[2;2Hy\033[5;5H\033#8z'`, nil},
		{"protected", 30, 8, f + `printf 'one two three\r\n\033[1"qPROT\033[0"q free \033[2"qmore\r\n\033[1"qP2\033[0"q x\033[1;5H\033[?K\033[2;3H\033[?1K\033[3;1H\033[1"qkeep\033[0"q\033[1;1H\033[?J\033[8;1H\033[1"qp\033[2J\033[1;1Hz'`, nil},
		{"moves", 30, 8, f + `printf '\033[3;5Ha\033[2ab\033[2ec\033[Ed\033[2Fe\033[12\140f\033[3dg\033Dh\033Ei\033Mj\033[4Ik\033[2Zl\033[1;8r\033[8;1H\033D\033D\033[1;1H\033M\033M\033[r\033[?1048h\033[5;5H\033[?1048lm\033[?1047hn\033[?1047l\033[?47h\033[?1049h\033[3;3Hz\0337\033[?1049l\0338o'`, nil},
		{"charsets", 40, 8, f + `printf '\033(0lqqk\033(B \033)0\016xax\017 \033*A\033n#\033o\033+<\033}\033|~\033~\033(B\017\r\n\033(K[\\]{|}\033(B \033(R@[\033(B \033(4#@\033(B\0337\033(0\0338q\033(0\0337\033(B\0338q'`, nil},
		{"sync-output", 40, 8, f + `printf 'before\033[?2026h\033[2J\033[Hmid-frame\033[?2026l\033[?2026hlater'`, nil},
		// editors, viewers and TUIs not tried before (h-term's sweep)
		{"micro", 80, 24, f + "exec micro text.go", []sweepStep{
			{wait: `plain`, keys: "\x1b[B\x1b[Bhello 日本 ✅"}, {keys: "\x05"}, {keys: "\x1b"}, {cols: 60, rows: 18}, {keys: "\x11"}, {keys: "n"}}},
		{"joe", 80, 24, f + "exec joe -nobackups text.go", []sweepStep{
			{wait: `plain`, keys: "hello 日本 ✅\r"}, {keys: "\x0b\x0b"}, {cols: 60, rows: 18}, {keys: "\x03"}, {keys: "y"}}},
		{"mg", 80, 24, f + "exec mg -n text.go", []sweepStep{
			{wait: `plain`, keys: "hello 日本\r"}, {keys: "\x18" + "2"}, {cols: 60, rows: 18}, {keys: "\x18\x03"}, {keys: "n"}, {keys: "yes\r"}}},
		{"hexedit", 80, 24, f + "exec hexedit text.go", []sweepStep{
			{wait: `70 6C`, keys: "\x1b[B\x1b[C\x1b[C"}, {keys: "\t"}, {cols: 60, rows: 18}, {keys: "\x03"}}},
		{"ne", 80, 24, f + "exec ne --no-config text.go", []sweepStep{
			{wait: `plain`, keys: "hello 日本 ✅"}, {keys: "\x1b"}, {keys: "\x1b"}, {cols: 60, rows: 18}, {keys: "\x11"}, {keys: "y"}}},
		{"kakoune", 80, 24, f + "exec kak -n text.go", []sweepStep{
			{wait: `text.go`, keys: "ihello 日本 ✅\x1b"}, {keys: ":"}, {keys: "\x1b"}, {cols: 60, rows: 18}, {keys: ":q!\r"}}},
		{"bvi", 80, 24, f + "exec bvi text.go", []sweepStep{
			{wait: `plain`, keys: "jjll"}, {keys: "\t"}, {cols: 60, rows: 18}, {keys: ":q!\r"}}},
		{"calcurse", 90, 26, f + "exec calcurse -D $HOME/calcurse", []sweepStep{
			{wait: `Appointments|TODO|Todo`, keys: "\t"}, {keys: "\t"}, {keys: "l"}, {cols: 70, rows: 20}, {keys: "q"}, {keys: "y"}}},
		{"tty-clock", 60, 15, f + "timeout --foreground 2 tty-clock -s -c -C 4 -b", nil},
		{"links2", 80, 24, f + "exec links2 a.html", []sweepStep{
			{wait: `Title`, keys: "\x1b[B"}, {keys: "\r"}, {keys: "\x1b[D"}, {cols: 60, rows: 20}, {keys: "q"}, {keys: "y"}}},
		{"vim-truecolor", 80, 24, f + "COLORTERM=truecolor exec vim -u NONE -N -i NONE -c 'set termguicolors' -c 'syntax on' -c 'colorscheme desert' -c 'set cursorline nu' text.go", []sweepStep{
			{wait: `plain`, keys: "Go日本 ✅ wide\x1b"}, {keys: ":vsplit\r"}, {cols: 60, rows: 18}, {keys: ":qa!\r"}}},
		{"tmux-styles", 90, 24, f + `printf '%s\n' 'set -g status-style "bg=#303030,fg=#ffaf00"' 'set -g window-status-current-style "bg=red,fg=white,bold,underscore"' 'set -g status-left "#[fg=colour39,italics]#S #[default]"' 'set -g status-right "#[fg=#00ff00,reverse] 日本 #[default] ✅"' 'set -g pane-border-style fg=colour240' 'set -g pane-active-border-style "fg=#00ff00"' 'set -g pane-border-status top' > $HOME/tmux.conf; exec tmux -L tbsweep-styles -f $HOME/tmux.conf new-session "seq 1 30; printf '\033[1;38;2;255;100;0mtrue\033[0m\n'; sleep 30"`, []sweepStep{
			{wait: `true`, keys: "\x02\""}, {keys: "ls --color=always /etc | head -20\r"}, {keys: "\x02%"}, {cols: 70, rows: 20}, {keys: "\x02:kill-server\r"}}},
		{"less-colours", 80, 24, f + "cd repo && git log -p --color=always | less -R", []sweepStep{
			{wait: `commit`, keys: " "}, {keys: "/thirty\r"}, {keys: "G"}, {cols: 60, rows: 18}, {keys: "g"}, {keys: "q"}}},
		{"nano", 80, 24, f + "exec nano --ignorercfiles -l -m text.go", []sweepStep{
			{wait: `plain`, keys: "hello 日本 ✅\r"}, {keys: "\x17main\r"}, {keys: "\x07"}, {cols: 60, rows: 18}, {keys: "\x18"}, {keys: "n"}}},
		{"nethack", 80, 24, f + "mkdir -p $HOME/nh && NETHACKOPTIONS='name:tb,role:val,race:hum,gender:fem,align:law,!autopickup,color,!legacy' exec /usr/games/nethack -u tb", []sweepStep{
			{wait: `welcome|Hello|--More--|Velkommen|Shall`, keys: " "}, {keys: " "}, {keys: "l"}, {keys: "i"}, {keys: "\x1b"}, {cols: 90, rows: 30}, {keys: "#quit\r"}, {keys: "y"}, {keys: "q"}, {keys: "q"}}},
		{"cmus", 90, 26, f + "exec cmus", []sweepStep{
			{wait: `Press <enter>|Artist`, keys: "\r"}, {wait: `Artist`, keys: "5"}, {keys: "\x1b[B\x1b[B"}, {keys: "7"}, {cols: 70, rows: 20}, {keys: ":quit\r"}}},
		{"newsboat", 80, 24, f + "printf 'file://$D/feed.xml\\n' > $HOME/urls; printf '<?xml version=\\\"1.0\\\"?><rss version=\\\"2.0\\\"><channel><title>Feed 日本</title><item><title>One ✅</title><description>first</description></item><item><title>Two</title></item></channel></rss>' > $D/feed.xml; exec newsboat -u $HOME/urls -c $HOME/cache.db -C /dev/null -r", []sweepStep{
			{wait: `Feed|feed|Newsboat|newsboat`, keys: "\r"}, {keys: "\x1b[B"}, {keys: "\r"}, {cols: 60, rows: 18}, {keys: "q"}, {keys: "q"}, {keys: "q"}}},
		{"alpine", 90, 26, f + "exec alpine -p $HOME/pinerc -f mbox -i", []sweepStep{
			{wait: `mail folders|MAIN MENU`, keys: "\r"}, {wait: `MAIN MENU|GREETING`, keys: "e"}, {keys: "i"}, {keys: "\x1b[B"}, {keys: "\r"}, {keys: "<"}, {cols: 70, rows: 20}, {keys: "q"}, {keys: "y"}}},
		{"ls-hyperlink", 40, 12, f + "mkdir -p links && cd links && touch a-very-long-file-name-that-wraps-the-row.txt b.txt 日本語のファイル名.txt && ls --hyperlink=always --color=always -la; ls --hyperlink=always --color=always; printf '\\033]8;;file:///x\\033\\\\open link at the end ' ", nil},
		{"kitty-keys", 40, 8, f + `printf '\033[>1u\033[>4;2m\033[=5;1u\033[?9001h\033[?1016h\033[?1003h\033[?1005h\033[?1015hx\033[<u\033[?u\033[?1l\033[?66h'`, nil},
	}
}
