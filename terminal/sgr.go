package terminal

// sgr is xterm.js's charAttributes.
func (t *term) sgr(x *xparams) {
	a := &t.pen
	if len(x.main) == 1 && x.main[0] == 0 {
		t.sgr0()
		return
	}
	for i := 0; i < len(x.main); i++ {
		p := x.main[i]
		switch {
		case p >= 30 && p <= 37:
			a.fg = mkColor(colorP16, p-30)
		case p >= 40 && p <= 47:
			a.bg = mkColor(colorP16, p-40)
		case p >= 90 && p <= 97:
			a.fg = mkColor(colorP16, p-90+8)
		case p >= 100 && p <= 107:
			a.bg = mkColor(colorP16, p-100+8)
		case p == 0:
			t.sgr0()
		case p == 1:
			a.flags |= flagBold
		case p == 2:
			a.flags |= flagDim
		case p == 3:
			a.flags |= flagItalic
		case p == 4:
			style := 1
			if len(x.sub[i]) > 0 {
				style = x.sub[i][0]
			}
			t.underline(style)
		case p == 5:
			a.flags |= flagBlink
		case p == 7:
			a.flags |= flagInverse
		case p == 8:
			a.flags |= flagInvisible
		case p == 9:
			a.flags |= flagStrike
		case p == 21:
			t.underline(2)
		case p == 22:
			a.flags &^= flagBold | flagDim
		case p == 23:
			a.flags &^= flagItalic
		case p == 24:
			t.underline(0)
		case p == 25:
			a.flags &^= flagBlink
		case p == 27:
			a.flags &^= flagInverse
		case p == 28:
			a.flags &^= flagInvisible
		case p == 29:
			a.flags &^= flagStrike
		case p == 39:
			a.fg = 0
		case p == 49:
			a.bg = 0
		case p == 38 || p == 48 || p == 58:
			i += t.extractColor(x, i)
		case p == 53:
			a.flags |= flagOverline
		case p == 55:
			a.flags &^= flagOverline
		case p == 59:
			// xterm.js stores -1 in the underline colour's 26 bits, which
			// reads back as RGB white, not as "the foreground's": the
			// viewer draws such underlines white, so the model does too
			a.ulColor = ulColorAfter59
			t.updateExtended()
		}
	}
}

// ulColorAfter59 is the underline colour SGR 59 leaves in xterm.js.
var ulColorAfter59 = mkColor(colorRGB, 0xffffff)

func (t *term) sgr0() {
	link := t.pen.link
	t.pen = pen{link: link}
	t.updateExtended()
}

// underline is xterm.js's _processUnderline.
func (t *term) underline(style int) {
	if style < 0 || style > 5 {
		style = 1
	}
	t.pen.flags |= flagUnderline
	t.pen.ul = uint8(style)
	if style == 0 {
		t.pen.flags &^= flagUnderline
	}
	t.updateExtended()
}

// extractColor is xterm.js's _extractColor: 38/48/58 with 5;n or 2;r;g;b,
// as separate parameters or colon sub-parameters. It returns how many
// main parameters it consumed after the first.
func (t *term) extractColor(x *xparams, pos int) int {
	// accu is xterm.js's array: a sub-parameter can be written one past
	// its six slots, which grows it (alen) instead of failing
	accu := [7]int{0, 0, -1, 0, 0, 0, 0}
	alen := 6
	cSpace, advance := 0, 0
	for {
		accu[advance+cSpace] = x.main[pos+advance]
		if subs := x.sub[pos+advance]; len(subs) > 0 {
			for i := 0; ; {
				if accu[1] == 5 {
					cSpace = 1
				}
				accu[advance+i+1+cSpace] = subs[i]
				alen = max(alen, advance+i+2+cSpace)
				i++
				if i >= len(subs) || i+advance+1+cSpace >= alen {
					break
				}
			}
			break
		}
		if (accu[1] == 5 && advance+cSpace >= 2) || (accu[1] == 2 && advance+cSpace >= 5) {
			break
		}
		if accu[1] != 0 {
			cSpace = 1
		}
		advance++
		if advance+pos >= len(x.main) || advance+cSpace >= alen {
			break
		}
	}
	for i := 2; i < len(accu); i++ {
		if accu[i] == -1 {
			accu[i] = 0
		}
	}
	set := func(c color) color {
		switch accu[1] {
		case 2:
			return mkColor(colorRGB, (accu[3]&0xff)<<16|(accu[4]&0xff)<<8|accu[5]&0xff)
		case 5:
			return mkColor(colorP256, accu[3]&0xff)
		}
		return c
	}
	switch accu[0] {
	case 38:
		t.pen.fg = set(t.pen.fg)
	case 48:
		t.pen.bg = set(t.pen.bg)
	case 58:
		t.pen.ulColor = set(t.pen.ulColor)
	}
	return advance
}
