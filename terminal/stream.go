package terminal

import (
	"strconv"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// c1ST is the 8-bit String Terminator. x/ansi's parser (v0.11) ends every
// control string at this byte, even when it is the middle of a UTF-8
// character such as "✳" (E2 9C B3) in Claude Code's title.
const c1ST = 0x9C

// stPlaceholder replaces a 0x9C that continues a UTF-8 character inside a
// control string. Any byte the string states collect would do; the
// emulator's OSC reader (osc.go) is given the byte itself.
const stPlaceholder = 0x9D

// streamState is the escape parser the screen model runs over a byte stream, with
// one correction: inside an OSC, DCS, SOS, PM or APC string, a 0x9C that
// continues a UTF-8 character is data, not the C1 terminator. Both the
// emulator (whose parser gets such bytes rewritten) and the cutter
// (which must agree with the emulator on where strings end) use it.
//
// A streamState is owned by one goroutine.
type streamState struct {
	p *ansi.Parser
	// need counts UTF-8 continuation bytes still expected inside a string.
	need int
	// osc reads the current OSC string as xterm.js does (osc.go); nil
	// for the cutter, which only follows states.
	osc *oscReader
	// dcsHead holds the first bytes of the current DCS string's data,
	// dcsN how many bytes it has in all and dcsUnits its length in UTF-16
	// code units: what DECRQSS is answered from (vt.go, dcs).
	dcsHead        [4]byte
	dcsN, dcsUnits int
	// seq is the sequence being read, from its introducer (written as
	// ESC and a 7-bit final even when it came as a C1 control) through its
	// header (parameters, intermediates, a DCS's final), at most seqMax
	// bytes: what puts a fresh parser where this one is (resume).
	seq []byte
	// inters counts the intermediate bytes (0x20–0x2F) of the sequence
	// being read. x/ansi keeps only the last; xterm.js's handlers are
	// keyed by all of them, and none has two.
	inters int
	// u8 holds the bytes of a UTF-8 character not yet complete, u8len
	// how many it has (0 when none is held): see feed.
	u8         [4]byte
	u8n, u8len int
	// exec runs a C0 control met inside an escape sequence (see
	// advanceKept); nil for the cutter, which only follows states.
	exec func(byte)
	// ignore is xterm.js's CSI_IGNORE or DCS_IGNORE state (x/ansi has
	// neither): a sequence xterm.js drops whole is being read to its end
	// while the parser is left, unfed, in the state it was in.
	ignore ignoring
	// digits is the CSI or DCS parameter being read, held back from the
	// parser and clamped as xterm.js clamps it (maxParam) until a byte
	// that is not a digit comes; held says digits are held.
	digits int64
	held   bool
	// param is the index, in x/ansi's order (parameters and
	// sub-parameters alike), of the parameter being read; clamped marks
	// the ones that reached maxParam, which x/ansi cannot hold (see
	// maxParam).
	param   int
	clamped uint64
}

// maxParam is the largest parameter value xterm.js keeps: its parser clamps
// every parameter and sub-parameter to 0x7FFFFFFF. x/ansi's (v0.11, v0.12)
// keeps a parameter in the low 31 bits of an int and its sub-parameter flag
// in the bits above, so a larger value lost its high bits and could read as
// having sub-parameters: CSI 2147483648 C moved the cursor one column, CSI
// 4294967297;3 H went home. Its digits are held (see advance) and the
// clamped value is fed in their place.
const maxParam = 1<<31 - 1

// maxParam itself is x/ansi's mark of a missing parameter, so a clamped
// parameter is fed as one less and marked in clamped (xparams.load puts
// maxParam back).
const fedMaxParam = maxParam - 1

// collectingParams reports whether st reads a CSI's or DCS's parameters.
func collectingParams(st parser.State) bool {
	switch st {
	case parser.CsiEntryState, parser.CsiParamState, parser.DcsEntryState, parser.DcsParamState:
		return true
	}
	return false
}

// reset drops whatever sequence the parser was reading, held digits too.
func (s *streamState) reset() {
	s.p.Reset()
	s.forgetParams()
	s.seq = s.seq[:0]
	if s.osc != nil {
		s.osc.release()
	}
}

// forgetParams drops what was kept of the sequence's parameters.
func (s *streamState) forgetParams() {
	s.held, s.digits, s.param, s.clamped = false, 0, 0, 0
}

// release feeds the held parameter's clamped value to the parser.
func (s *streamState) release() {
	v := s.digits
	if v == maxParam {
		v = fedMaxParam
		if s.param < 64 {
			s.clamped |= 1 << s.param
		}
	}
	var buf [20]byte
	for _, c := range strconv.AppendInt(buf[:0], v, 10) {
		s.p.Advance(c)
	}
	s.held, s.digits = false, 0
}

// ignoring is which of xterm.js's ignore states a streamState is in.
type ignoring uint8

const (
	notIgnoring ignoring = iota
	ignoreCSI
	ignoreDCS
)

// feed is advance behind xterm.js's UTF-8 decoding (Utf8ToUtf32), which
// runs before its parser sees anything: a character's bytes reach the
// parser once it is complete and valid; a character cut short by a byte
// that does not continue it vanishes and that byte is read afresh; stray
// continuation bytes, bytes 0xF8–0xFF, overlong forms, surrogates, U+FEFF
// and code points past U+10FFFF vanish. each, if not nil, gets what
// advance returns for every byte fed to the parser.
func (s *streamState) feed(b byte, each func(out byte, action parser.Action)) {
	if s.u8len > 0 {
		if b&0xC0 == 0x80 {
			s.u8[s.u8n] = b
			s.u8n++
			if s.u8n < s.u8len {
				return
			}
			n := s.u8len
			s.u8len, s.u8n = 0, 0
			if validUTF8(s.u8[:n]) {
				s.char(s.u8[:n], each)
			}
			return
		}
		s.u8len, s.u8n = 0, 0
	}
	switch {
	case b < 0x80:
		s.emit(b, each)
	case b&0xE0 == 0xC0:
		s.u8[0], s.u8n, s.u8len = b, 1, 2
	case b&0xF0 == 0xE0:
		s.u8[0], s.u8n, s.u8len = b, 1, 3
	case b&0xF8 == 0xF0:
		s.u8[0], s.u8n, s.u8len = b, 1, 4
	}
}

// holding reports whether feed holds an incomplete character.
func (s *streamState) holding() bool { return s.u8len > 0 }

// char feeds a complete, valid UTF-8 character as xterm.js's parser reads
// its code point: U+0080–U+009F are the C1 controls (c1); any other is
// printed in ground state and is data in an OSC or DCS string, ignored
// while a sequence is ignored, and elsewhere (an escape, control or DCS
// sequence not yet at its end, SOS, PM, APC) an error that drops the
// sequence and the character alike (xterm.js's default transition). x/ansi
// printed it and carried on.
func (s *streamState) char(u []byte, each func(byte, parser.Action)) {
	if len(u) == 2 && u[0] == 0xC2 && u[1] < 0xA0 {
		s.c1(u[1], each)
		return
	}
	if s.ignore != notIgnoring {
		report(each, u[len(u)-1], parser.IgnoreAction)
		return
	}
	switch s.p.State() {
	case parser.GroundState, parser.OscStringState, parser.DcsStringState:
		for _, c := range u {
			s.emit(c, each)
		}
	default:
		s.reset()
		report(each, u[len(u)-1], parser.NoneAction)
	}
}

// c1 is xterm.js's "anywhere" transitions for a C1 control sent as UTF-8:
// ST ends a string (and is nothing elsewhere), the others leave whatever
// sequence or string was being read, unfinished, and act as 8-bit
// controls — x/ansi's own transitions for them outside strings. x/ansi
// had printed them (and the terminal executed only IND, NEL and HTS).
func (s *streamState) c1(c byte, each func(byte, parser.Action)) {
	s.forgetParams() // every C1 leaves the sequence being read
	if s.ignore != notIgnoring {
		s.ignore = notIgnoring
		s.reset()
	}
	st := s.p.State()
	switch {
	case c == c1ST && inString(st):
		s.need = 0
	case c == c1ST:
		s.reset() // xterm.js ignores it: not an execute, which ends a join
		report(each, c, parser.IgnoreAction)
		return
	case inString(st):
		s.reset()
	}
	out, action := s.advanceKept(c)
	report(each, out, action)
}

// report tells each, when set, what one byte did.
func report(each func(byte, parser.Action), out byte, action parser.Action) {
	if each != nil {
		each(out, action)
	}
}

func (s *streamState) emit(c byte, each func(byte, parser.Action)) {
	out, action, keep := s.advance(c)
	if keep && each != nil {
		each(out, action)
	}
}

// validUTF8 applies xterm.js's checks to a complete sequence.
func validUTF8(b []byte) bool {
	switch len(b) {
	case 2:
		return rune(b[0]&0x1F)<<6|rune(b[1]&0x3F) >= 0x80
	case 3:
		cp := rune(b[0]&0x0F)<<12 | rune(b[1]&0x3F)<<6 | rune(b[2]&0x3F)
		return cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) && cp != 0xFEFF
	default:
		cp := rune(b[0]&0x07)<<18 | rune(b[1]&0x3F)<<12 | rune(b[2]&0x3F)<<6 | rune(b[3]&0x3F)
		return cp >= 0x10000 && cp <= 0x10FFFF
	}
}

func newStreamState() *streamState {
	p := ansi.NewParser()
	p.SetDataSize(1) // the mirror never reads string data
	return &streamState{p: p}
}

// inString reports whether the parser is collecting a control string.
func inString(s parser.State) bool {
	switch s {
	case parser.OscStringState, parser.DcsStringState,
		parser.SosStringState, parser.PmStringState, parser.ApcStringState:
		return true
	}
	return false
}

// strayC1 reports whether b, read in state st, is a byte in 0x80–0x9F that
// does not continue a UTF-8 character. xterm.js decodes UTF-8 before its
// parser sees anything, so such a byte is invalid and vanishes; x/ansi reads
// it as an 8-bit C1 control (0x8D, reverse index, scrolled the screen).
func strayC1(st parser.State, b byte) bool {
	return b >= 0x80 && b <= 0x9F && st != parser.Utf8State && !inString(st)
}

// advance feeds one byte. It returns the byte the parser saw in its place and
// the parser action, and keeps the per-string bookkeeping. A stray C1 byte
// (see strayC1) is not fed: keep is false.
func (s *streamState) advance(b byte) (out byte, action parser.Action, keep bool) {
	before := s.p.State()
	if strayC1(before, b) {
		return 0, parser.NoneAction, false
	}
	if s.ignore == notIgnoring && collectingParams(before) {
		if b >= '0' && b <= '9' {
			s.digits = min(s.digits*10+int64(b-'0'), maxParam)
			s.held = true
			s.seqAdd(b)
			return b, parser.ParamAction, true
		}
		// A C0 control executed inside the sequence leaves the parameter
		// being read (CSI 1 ^A 2 C is CSI 12 C); any other byte ends it.
		if s.held && (b >= 0x20 || b == ansi.CAN || b == ansi.SUB || b == ansi.ESC) {
			s.release()
			before = s.p.State()
		}
		if b == ';' || b == ':' {
			s.param++
		}
	}
	if s.ignore != notIgnoring && b < 0x80 {
		out, action = s.ignored(b)
		return out, action, true
	}
	switch {
	case before == parser.CsiParamState && b >= 0x3C && b <= 0x3F,
		before == parser.CsiIntermediateState && b >= 0x30 && b <= 0x3F:
		// a private marker after parameters, or a parameter after an
		// intermediate: xterm.js drops the sequence (x/ansi dispatched
		// the first and printed what followed the second)
		s.ignore = ignoreCSI
		s.seqAdd(b)
		return b, parser.IgnoreAction, true
	case before == parser.DcsParamState && b >= 0x3C && b <= 0x3F,
		before == parser.DcsIntermediateState && b >= 0x30 && b <= 0x3F:
		s.ignore = ignoreDCS
		s.seqAdd(b)
		return b, parser.IgnoreAction, true
	case before == parser.DcsEntryState && b == ansi.ESC:
		s.reset() // xterm.js starts an escape sequence; x/ansi passed it through as data
	}
	out, action = s.advanceKept(b)
	return out, action, true
}

// ignored reads byte b (below 0x80) of a sequence xterm.js ignores: CAN and
// SUB end it (executed), ESC ends it and starts another, a CSI's final byte
// ends it, a C0 control inside a CSI is executed there; the rest is dropped.
// The parser, unfed meanwhile, is reset to ground as it ends.
func (s *streamState) ignored(b byte) (byte, parser.Action) {
	switch {
	case b == ansi.CAN || b == ansi.SUB:
		s.ignore = notIgnoring
		s.reset()
		if s.exec != nil {
			s.exec(b)
		}
		return b, parser.ExecuteAction
	case b == ansi.ESC:
		s.ignore = notIgnoring
		s.reset()
		return s.advanceKept(b)
	case s.ignore == ignoreCSI && b >= 0x40 && b <= 0x7E:
		s.ignore = notIgnoring
		s.reset()
	case s.ignore == ignoreCSI && b < 0x20:
		if s.exec != nil {
			s.exec(b)
		}
		return b, parser.ExecuteAction
	}
	return b, parser.IgnoreAction
}

func (s *streamState) advanceKept(b byte) (byte, parser.Action) {
	before := s.p.State()
	if b < 0x20 && b != ansi.CAN && b != ansi.SUB && b != ansi.ESC {
		// A C0 control inside an escape or control sequence is executed
		// there and the sequence goes on (xterm.js's parser, after the
		// VT500's); inside a DCS's parameters it is ignored. x/ansi's
		// parser executes it but adds it to the command it is collecting
		// (CSI 2 ^A T dispatched as CSI 2 U, a private CSI lost its "?"),
		// so it does not see it.
		switch before {
		case parser.EscapeState, parser.EscapeIntermediateState,
			parser.CsiEntryState, parser.CsiParamState, parser.CsiIntermediateState:
			if s.exec != nil {
				s.exec(b)
			}
			return b, parser.ExecuteAction
		case parser.DcsEntryState, parser.DcsParamState, parser.DcsIntermediateState:
			return b, parser.NoneAction
		}
	}
	if !inString(before) {
		s.need = 0
		action := s.p.Advance(b)
		s.track(before, b)
		if st := s.p.State(); (st == parser.CsiEntryState || st == parser.DcsEntryState) && !collectingParams(before) {
			s.forgetParams() // a new sequence's parameters
		}
		switch st := s.p.State(); {
		case st == parser.OscStringState && s.osc != nil:
			s.osc.start()
		case st == parser.DcsStringState:
			s.dcsN, s.dcsUnits = 0, 0
		}
		return b, action
	}
	out := s.stringByte(b)
	action := s.p.Advance(out) // an OSC's end runs the emulator's handler, which reads s.osc
	if s.p.State() != before {
		s.track(before, b) // the string ended: ground, or ESC starting another
		if (b == ansi.CAN || b == ansi.SUB) && s.exec != nil {
			s.exec(b) // xterm.js executes them wherever they come, which ends a join
		}
	}
	switch {
	case s.osc != nil && before == parser.OscStringState:
		if s.p.State() != parser.OscStringState {
			s.osc.release()
		} else if b >= 0x20 {
			s.osc.put(b) // the byte itself, not the placeholder
		}
	case before == parser.DcsStringState && s.p.State() == parser.DcsStringState && b >= 0x20 && b != 0x7F:
		// xterm.js puts into a DCS string every character but C0 controls and DEL
		if s.dcsN < len(s.dcsHead) {
			s.dcsHead[s.dcsN] = b
		}
		s.dcsN++
		s.dcsUnits += utf16Units(b)
	}
	return out, action
}

// stringByte decides whether b, read inside a control string, is a UTF-8
// continuation that must not terminate the string.
func (s *streamState) stringByte(b byte) byte {
	if s.need > 0 && b >= 0x80 && b <= 0xBF {
		s.need--
		if b == c1ST {
			return stPlaceholder
		}
		return b
	}
	switch {
	case b >= 0xC2 && b <= 0xDF:
		s.need = 1
	case b >= 0xE0 && b <= 0xEF:
		s.need = 2
	case b >= 0xF0 && b <= 0xF4:
		s.need = 3
	default:
		s.need = 0
	}
	return b
}

// ground reports whether the parser is between sequences and characters.
func (s *streamState) ground() bool {
	return s.p.State() == parser.GroundState
}

// seqMax bounds seq: no sequence a program means has a longer header, and a
// longer one (thousands of parameters) is resumed from its first seqMax bytes.
const seqMax = 256

// seqAdd adds header byte b to the sequence being read.
func (s *streamState) seqAdd(b byte) {
	if len(s.seq) < seqMax {
		s.seq = append(s.seq, b)
	}
}

// track keeps seq after byte b took the parser from state before: empty
// between sequences, begun afresh by ESC or a C1 introducer, and added to
// while a header is read (a string's payload is not a header).
func (s *streamState) track(before parser.State, b byte) {
	switch st := s.p.State(); {
	case st == parser.GroundState || st == parser.Utf8State:
		s.seq = s.seq[:0]
	case b == ansi.ESC:
		s.seq, s.inters = append(s.seq[:0], ansi.ESC), 0
	case b >= 0x80 && b <= 0x9F: // a C1 control, as ESC and its 7-bit final
		s.seq, s.inters = append(s.seq[:0], ansi.ESC, b-0x40), 0
	case inString(before):
	default:
		s.seqAdd(b)
		if b >= 0x20 && b <= 0x2F {
			s.inters++
		}
	}
}

// resume appends to p what puts a fresh parser (a viewer's xterm.js after a
// redraw) inside the sequence this one is reading, if any, so that the output
// after a snapshot taken there reads alike on both: the rest of a long OSC
// 52 copy or inline image is then swallowed, not printed as text. A snapshot
// is taken between batches, and batches are cut only between sequences,
// except when 64 KiB pass with no such point (Coalescer).
func (s *streamState) resume(p []byte) []byte {
	switch s.p.State() {
	case parser.GroundState, parser.Utf8State:
	case parser.OscStringState:
		p = append(p, ansi.ESC, ']')
		if s.osc != nil {
			p = s.osc.resume(p)
		}
	default:
		p = append(p, s.seq...)
	}
	if s.holding() {
		p = append(p, s.u8[:s.u8n]...) // a character cut short by the snapshot
	}
	return p
}
