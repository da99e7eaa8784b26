package terminal

import (
	"bytes"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
)

// oscCommands are the OSC numbers x/vt handles; their data may carry
// placeholders to put back before any handler reads it.
var oscCommands = []int{0, 1, 2, 7, 8, 10, 11, 12, 110, 111, 112}

// observe registers handlers that track what x/vt keeps private. Each one
// returns false, so the built-in handler still runs after it; x/vt calls the
// last registered first, so these see the state before the built-in acts.
func (t *term) observe() {
	for _, cmd := range oscCommands {
		t.vt.RegisterOscHandler(cmd, func(data []byte) bool {
			t.restoreST(data)
			t.trackOsc(cmd, data)
			return false
		})
	}
	t.vt.RegisterCsiHandler('m', func(p ansi.Params) bool {
		uv.ReadStyle(p, &t.scr[t.cur()].pen)
		return false
	})
	t.vt.RegisterCsiHandler('r', func(p ansi.Params) bool {
		t.trackMargins(p)
		return false
	})
	t.vt.RegisterCsiHandler('s', func(ansi.Params) bool {
		if !t.modes[ansi.ModeLeftRightMargin].IsSet() {
			t.save()
		}
		return false
	})
	t.vt.RegisterEscHandler('7', func() bool { t.save(); return false })
	t.vt.RegisterEscHandler('8', func() bool { t.restore(); return false })
	t.vt.RegisterEscHandler('c', func() bool { t.reset(); return false })
	t.vt.RegisterEscHandler('n', func() bool { t.gl = 2; return false })
	t.vt.RegisterEscHandler('o', func() bool { t.gl = 3; return false })
	for g, inter := range []byte{'(', ')', '*', '+'} {
		for _, final := range []byte{'A', 'B', '0'} {
			t.vt.RegisterEscHandler(ansi.Command(0, inter, final), func() bool {
				t.charsets[g] = final
				return false
			})
		}
	}
	t.vt.RegisterCsiHandler(ansi.Command('?', 0, 'h'), func(p ansi.Params) bool {
		t.trackModes(p, true)
		return false
	})
	t.vt.RegisterCsiHandler(ansi.Command('?', 0, 'l'), func(p ansi.Params) bool {
		t.trackModes(p, false)
		return false
	})
}

// restoreST puts back the 0x9C bytes that write replaced in this OSC.
func (t *term) restoreST(data []byte) {
	for _, off := range t.oscFixes {
		if off < len(data) && data[off] == stPlaceholder {
			data[off] = c1ST
		}
	}
}

// trackOsc records titles (parsed here, since x/vt drops titles that contain
// a ';') and hyperlinks.
func (t *term) trackOsc(cmd int, data []byte) {
	_, arg, ok := bytes.Cut(data, []byte{';'})
	if !ok {
		return
	}
	switch cmd {
	case 0:
		t.title, t.icon = string(arg), string(arg)
	case 1:
		t.icon = string(arg)
	case 2:
		t.title = string(arg)
	case 8:
		params, url, ok := bytes.Cut(arg, []byte{';'})
		if ok && bytes.IndexByte(url, ';') < 0 {
			t.scr[t.cur()].link = uv.Link{Params: string(params), URL: string(url)}
		}
	}
}

// trackMargins mirrors DECSTBM as x/vt applies it.
func (t *term) trackMargins(p ansi.Params) {
	h := t.vt.Height()
	top, _, _ := p.Param(0, 1)
	top = max(top, 1)
	bottom, _, _ := p.Param(1, h)
	if bottom < 1 {
		bottom = h
	}
	if top >= bottom {
		return
	}
	s := &t.scr[t.cur()]
	s.top, s.bottom = top-1, bottom
}

func (t *term) save() {
	t.scr[t.cur()].saved = t.cursor()
}

func (t *term) restore() {
	s := &t.scr[t.cur()]
	s.pen, s.link = s.saved.pen, s.saved.link
}

// reset mirrors RIS: both screens reset, main screen active, title kept.
func (t *term) reset() {
	t.resetScreens(t.vt.Height())
	t.main, t.altVia = nil, 0
}

// trackModes follows DEC mode changes that move between screens or save and
// restore the cursor, one parameter at a time as x/vt does.
func (t *term) trackModes(p ansi.Params, set bool) {
	alt := t.vt.IsAltScreen()
	for _, param := range p {
		m := param.Param(-1)
		if s := t.modes[ansi.DECMode(m)]; s.IsPermanentlySet() || s.IsPermanentlyReset() {
			continue
		}
		switch {
		case m == 1048 && set:
			t.save()
		case m == 1048:
			t.restore()
		case (m == 1047 || m == 1049) && set:
			if m == 1049 {
				t.save()
			}
			if !alt {
				t.enterAlt(m)
				alt = true
			}
		case m == 1047 || m == 1049:
			t.main, alt = nil, false
		}
	}
}

// enterAlt keeps the main screen as it is before x/vt switches away from it:
// x/vt keeps it too but gives no way to read it while the alternate screen
// is active.
func (t *term) enterAlt(via int) {
	h := t.vt.Height()
	t.main = &uv.Buffer{Lines: make([]uv.Line, h)}
	for y := range h {
		t.main.Lines[y] = t.line(y)
	}
	t.mainCur = t.cursor()
	t.altVia = via
	t.scr[1].pen, t.scr[1].link = t.scr[0].pen, t.scr[0].link
}
