// Command prog is the real program the relay tests run in PTYs:
//
//	prog spinner   rewrites one line 100 times a second, 150 times, then waits
//	prog alt       a full-screen program in the alternate screen, then waits
//	prog colours   colours, attributes and wide characters, then waits
//	prog flood N   N bytes of numbered lines, then "END" and waits
//	prog burst N   on the first key, N bytes of numbered lines, then exits at once (status 3)
//	prog keys      raw mode: prints each read from stdin as hex, one per line
//	prog queries   as keys, and each "q" read also asks the terminal for a
//	               cursor report and its device attributes
//
// "waits" means it reads stdin and prints "got <hex>" for each read, so the
// tests can see it alive and type into it.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

func main() {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	arg := func() int { n, _ := strconv.Atoi(os.Args[2]); return n }
	switch os.Args[1] {
	case "spinner":
		frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴"}
		fmt.Fprint(w, "building\r\n")
		for i := range 150 {
			fmt.Fprintf(w, "\r\x1b[2K\x1b[36m%s\x1b[0m step %d/150", frames[i%len(frames)], i+1)
			w.Flush()
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Fprint(w, "\r\nSPIN DONE\r\n")
	case "alt":
		fmt.Fprint(w, "\x1b[32mmain screen\x1b[0m\r\n$ \x1b]0;✳ editor\x07\x1b[?1049h\x1b[?25l\x1b[?2004h\x1b[?1h\x1b[H\x1b[2J")
		fmt.Fprint(w, "\x1b[44;97m┌──── editor ────┐\x1b[0m\r\n")
		for i := range 5 {
			fmt.Fprintf(w, "│ line %d \x1b[1;31mred\x1b[0m │\r\n", i)
		}
		fmt.Fprint(w, "\x1b[10;3H\x1b[4mALT READY\x1b[0m\x1b[5;10H")
	case "colours":
		for i := 30; i < 38; i++ {
			fmt.Fprintf(w, "\x1b[%dm%d\x1b[%dm%d", i, i, i+60, i+60)
		}
		fmt.Fprint(w, "\x1b[0m\r\n")
		for i := 0; i < 256; i += 15 {
			fmt.Fprintf(w, "\x1b[38;5;%d;48;5;%dmx", i, 255-i)
		}
		fmt.Fprint(w, "\x1b[0m\r\n\x1b[38;2;10;200;30mtrue\x1b[1;3;4;7mattrs\x1b[0m\r\n")
		fmt.Fprint(w, "漢字かな 😀 👍🏽 e\u0301 wide\r\nCOLOURS READY\r\n")
	case "flood", "burst", "paced":
		// paced is a burst written at about 0.8 MB/s (16 KiB every 20 ms):
		// slower than a viewer through a forward under the race detector
		// reads, so only a viewer that stops reading falls behind. (At
		// 1.6 MB/s a fast viewer on a loaded machine fell its whole 2 MiB
		// queue behind and was redrawn for its own slowness.)
		n := arg()
		paced := os.Args[1] == "paced"
		if os.Args[1] != "flood" { // start on the first key, so a viewer can attach first
			fmt.Fprint(w, "BURST READY\r\n")
			w.Flush()
			os.Stdin.Read(make([]byte, 1))
		}
		for i := 0; n > 0; i++ {
			line := fmt.Sprintf("\x1b[3%dm%08d\x1b[0m the quick brown fox jumps over the lazy dog %d\n", i%8, i, i)
			if len(line) > n {
				line = line[:0]
				n = 0
			}
			w.WriteString(line)
			n -= len(line)
			if paced && w.Buffered() >= 16<<10 {
				w.Flush()
				time.Sleep(20 * time.Millisecond)
			}
		}
		if os.Args[1] != "flood" {
			w.WriteString("BURST END\n")
			w.Flush()
			os.Exit(3)
		}
		fmt.Fprint(w, "END\r\n")
	case "keys", "queries":
		raw := exec.Command("stty", "raw", "-echo")
		raw.Stdin = os.Stdin
		if err := raw.Run(); err != nil {
			panic(err)
		}
		fmt.Fprint(w, "KEYS READY\r\n")
	}
	w.Flush()
	buf := make([]byte, 1024)
	for {
		n, err := os.Stdin.Read(buf)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "got %x\r\n", buf[:n])
		if os.Args[1] == "queries" && buf[0] == 'q' {
			w.WriteString("\x1b[6n\x1b[c\x1bP$q q\x1b\\") // cursor report, device attributes, cursor style (DECRQSS)
		}
		w.Flush()
	}
}
