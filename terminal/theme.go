package terminal

// The viewer's theme: the colours its xterm.js shows where a program set
// none, and answers colour queries (OSC 4, 10, 11, 12) with. The daemon
// answers those queries (the viewer's are silenced), so it answers with
// these: the foreground, background and cursor server/web/static/terminal.js
// gives its xterm.js, and xterm.js's default 256-colour palette, which that
// theme leaves as it is (TestViewerThemeMatchesTerminalJS holds both to the
// files).
var (
	viewerForeground = [3]uint8{0xe6, 0xe8, 0xeb}
	viewerBackground = [3]uint8{0x0f, 0x11, 0x15}
	viewerCursor     = [3]uint8{0xe6, 0xe8, 0xeb}
)

// viewerANSI is xterm.js's default palette's first 16 colours (its
// ThemeService's DEFAULT_ANSI_COLORS, the Tango palette).
var viewerANSI = [16][3]uint8{
	{0x2e, 0x34, 0x36}, {0xcc, 0x00, 0x00}, {0x4e, 0x9a, 0x06}, {0xc4, 0xa0, 0x00},
	{0x34, 0x65, 0xa4}, {0x75, 0x50, 0x7b}, {0x06, 0x98, 0x9a}, {0xd3, 0xd7, 0xcf},
	{0x55, 0x57, 0x53}, {0xef, 0x29, 0x29}, {0x8a, 0xe2, 0x34}, {0xfc, 0xe9, 0x4f},
	{0x72, 0x9f, 0xcf}, {0xad, 0x7f, 0xa8}, {0x34, 0xe2, 0xe2}, {0xee, 0xee, 0xec},
}

// viewerColor is colour i of the viewer's theme: a palette entry (the 16,
// then xterm.js's 6×6×6 cube and 24 greys), or the foreground, background
// or cursor.
func viewerColor(i int) [3]uint8 {
	switch {
	case i == colorFG:
		return viewerForeground
	case i == colorBG:
		return viewerBackground
	case i == colorCursor:
		return viewerCursor
	case i < 16:
		return viewerANSI[i]
	case i < 232:
		steps := [6]uint8{0, 95, 135, 175, 215, 255}
		n := i - 16
		return [3]uint8{steps[n/36%6], steps[n/6%6], steps[n%6]}
	}
	g := uint8(8 + 10*(i-232))
	return [3]uint8{g, g, g}
}
