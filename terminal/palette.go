package terminal

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The colours a program sets: OSC 4 (palette entries 0–255) and OSC
// 10/11/12 (the default foreground, background and cursor, kept as entries
// 256–258, xterm.js's SpecialColorIndex), restored by OSC 104 (some
// entries, or the whole palette) and 110/111/112. The browser's xterm.js
// applies them to its theme, so every cell in a palette colour (or the
// default one) shows them; no reset restores them.
const (
	colorFG     = 256
	colorBG     = 257
	colorCursor = 258
)

// setColors is xterm.js's setOrReportIndexedColor: index;spec pairs.
func (t *term) setColors(arg string) {
	slots := strings.Split(arg, ";")
	for len(slots) > 1 {
		idx, spec := slots[0], slots[1]
		slots = slots[2:]
		if !digits.MatchString(idx) {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil || i >= 256 {
			continue
		}
		if spec == "?" {
			t.reportColor(i) // the viewer's is silenced
		} else if c, ok := parseColor(spec); ok {
			t.setColor(i, c)
		}
	}
}

// specialColors is xterm.js's _setOrReportSpecialColor for OSC 10, 11 or
// 12: each slot sets (or queries) the next of foreground, background,
// cursor.
func (t *term) specialColors(cmd int, arg string) {
	for i, slot := range strings.Split(arg, ";") {
		n := cmd - 10 + i
		if n >= 3 {
			break
		}
		if slot == "?" {
			t.reportColor(colorFG + n)
		} else if c, ok := parseColor(slot); ok {
			t.setColor(colorFG+n, c)
		}
	}
}

// reportColor answers a query for colour i (a palette entry, or colorFG,
// colorBG, colorCursor) as the viewer's xterm.js would: with the colour
// the program set, else the viewer's theme's (docs/DECISIONS.md).
func (t *term) reportColor(i int) {
	c, ok := t.palette[i]
	if !ok {
		c = viewerColor(i)
	}
	ident := "4;" + strconv.Itoa(i)
	if i >= colorFG {
		ident = strconv.Itoa(10 + i - colorFG)
	}
	t.reply("\x1b]%s;rgb:%02x%02x/%02x%02x/%02x%02x\x1b\\", ident, c[0], c[0], c[1], c[1], c[2], c[2])
}

// restoreColors is OSC 104: the entries named, or the whole palette (not
// the special colours) when none is.
func (t *term) restoreColors(arg string) {
	if arg == "" {
		for i := range t.palette {
			if i < 256 {
				delete(t.palette, i)
			}
		}
		return
	}
	for _, s := range strings.Split(arg, ";") {
		if i, err := strconv.Atoi(s); err == nil && digits.MatchString(s) && i < 256 {
			delete(t.palette, i)
		}
	}
}

func (t *term) setColor(i int, c [3]uint8) {
	if t.palette == nil {
		t.palette = map[int][3]uint8{}
	}
	t.palette[i] = c
}

// writePalette restores the viewer's theme, then sets what the program
// set.
func (t *term) writePalette(b *bytes.Buffer) {
	b.WriteString("\x1b]104\x07\x1b]110\x07\x1b]111\x07\x1b]112\x07")
	keys := make([]int, 0, len(t.palette))
	for i := range t.palette {
		keys = append(keys, i)
	}
	slices.Sort(keys)
	for _, i := range keys {
		c := t.palette[i]
		spec := fmt.Sprintf("rgb:%02x/%02x/%02x", c[0], c[1], c[2])
		if i < 256 {
			b.WriteString("\x1b]4;" + strconv.Itoa(i) + ";" + spec + "\x07")
		} else {
			b.WriteString("\x1b]" + strconv.Itoa(10+i-colorFG) + ";" + spec + "\x07")
		}
	}
}

var (
	digits  = regexp.MustCompile(`^\d+$`)
	rgbSpec = regexp.MustCompile(`^([\da-f])/([\da-f])/([\da-f])$|^([\da-f]{2})/([\da-f]{2})/([\da-f]{2})$|^([\da-f]{3})/([\da-f]{3})/([\da-f]{3})$|^([\da-f]{4})/([\da-f]{4})/([\da-f]{4})$`)
	hexSpec = regexp.MustCompile(`^[\da-f]+$`)
)

// parseColor is xterm.js's XParseColor.parseColor: rgb:r/g/b with 1–4 hex
// digits a component (scaled), or #RGB, #RRGGBB, #RRRGGGBBB, #RRRRGGGGBBBB
// (truncated — #RGB's digit becomes the high nibble, as in xterm.js); no
// colour names.
func parseColor(spec string) ([3]uint8, bool) {
	low := strings.ToLower(spec)
	var c [3]uint8
	switch {
	case strings.HasPrefix(low, "rgb:"):
		m := rgbSpec.FindStringSubmatch(low[4:])
		if m == nil {
			return c, false
		}
		for g := 0; g < 4; g++ {
			if m[1+3*g] == "" {
				continue
			}
			base := []float64{15, 255, 4095, 65535}[g]
			for i := range 3 {
				v, _ := strconv.ParseUint(m[1+3*g+i], 16, 32)
				c[i] = uint8(roundHalfUp(float64(v) / base * 255))
			}
			return c, true
		}
	case strings.HasPrefix(low, "#"):
		h := low[1:]
		if !hexSpec.MatchString(h) || (len(h) != 3 && len(h) != 6 && len(h) != 9 && len(h) != 12) {
			return c, false
		}
		adv := len(h) / 3
		for i := range 3 {
			v, _ := strconv.ParseUint(h[adv*i:adv*i+adv], 16, 32)
			switch adv {
			case 1:
				v <<= 4
			case 3:
				v >>= 4
			case 4:
				v >>= 8
			}
			c[i] = uint8(v)
		}
		return c, true
	}
	return c, false
}

// roundHalfUp is JavaScript's Math.round for non-negative numbers.
func roundHalfUp(v float64) float64 { return float64(int64(v + 0.5)) }
