package terminal

import (
	"fmt"
	"testing"
)

// FuzzParseColor: a colour spec is a program's (OSC 4/10/11/12), so any
// text. A spec taken gives a colour that, written the way writePalette
// writes it to a viewer, is read back as itself; the three forms it takes
// agree on full-range colours.
func FuzzParseColor(f *testing.F) {
	for _, s := range []string{"rgb:ff/00/80", "rgb:f/0/8", "rgb:fff/000/888", "rgb:ffff/0000/8080", "#f08", "#ff0080",
		"#fff000888", "#ffff00008080", "RGB:FF/00/80", "rgb:ff/00", "rgb:/0/0", "#", "#12345", "red", "rgb:1f/2/3", "\u0130rgb:0/0/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		c, ok := parseColor(spec)
		if !ok {
			if c != ([3]uint8{}) {
				t.Fatalf("parseColor(%q) refused but gave %v", spec, c)
			}
			return
		}
		written := fmt.Sprintf("rgb:%02x/%02x/%02x", c[0], c[1], c[2])
		if back, ok := parseColor(written); !ok || back != c {
			t.Fatalf("parseColor(%q) = %v, written %q, read back %v %v", spec, c, written, back, ok)
		}
		hash := fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
		if back, ok := parseColor(hash); !ok || back != c {
			t.Fatalf("parseColor(%q) = %v, as %q read back %v %v", spec, c, hash, back, ok)
		}
	})
}
