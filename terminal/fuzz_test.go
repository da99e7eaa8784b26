package terminal

import "testing"

// FuzzEmulatorRedraw feeds arbitrary output and checks that nothing panics
// or hangs and that the redraw reproduces the screen in fresh and dirty
// emulators.
func FuzzEmulatorRedraw(f *testing.F) {
	for _, s := range []string{
		spinnerStream()[:400], altScreenStream(), colourStream(), modesStream(), scrollRegionStream(),
		"\x1b]0;" + claudeTitle + "\x07x", dirtyStream, "\x1b[6n\x1b[c", "\x1b#8", "\x1b[?69h\x1b[2;5s",
		"\x1b[01m00000000000\x1b7\x1b[0m\x1b[2m", "0\x8d🏽0",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8192 {
			return
		}
		src := newTerm(20, 6)
		defer src.close()
		src.write(data)
		checkRedraw(t, src)
	})
}
