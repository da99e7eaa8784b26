package terminal

import "strconv"

// oscReader reads an OSC string's identifier and payload as xterm.js's
// OscParser and OscHandler do, so the model acts on exactly the OSC strings
// the viewers' xterm.js acts on:
//
//   - the identifier is the digits before the first ';'. Any other character
//     there aborts the string (x/ansi took the leading digits of "2x;t" as
//     OSC 2), and an identifier no handler has, however long, matches none
//     (x/ansi's int wrapped, so 18446744073709551618 was OSC 2). A string
//     with no ';' is its identifier and an empty payload ("OSC 2 BEL" sets
//     an empty title).
//   - the payload is kept whole up to oscPayloadLimit UTF-16 code units, as
//     a JavaScript string counts them; a longer one is dropped and its
//     handler not run. x/ansi kept the first 64 KiB and ran the handler on
//     them.
//   - only the identifiers the model acts on keep their payload: an OSC 52
//     or 1337 of megabytes (a clipboard copy, an inline image) costs nothing,
//     as in xterm.js, which keeps a payload only for an identifier with a
//     handler.
//
// Bytes reach it after feed's UTF-8 decoding: whole, valid characters.
type oscReader struct {
	state oscState
	// id is the identifier read so far; -1 before its first digit.
	id int
	// keep says the model acts on id (oscHandlers): only then is the
	// payload kept, in data.
	keep bool
	data []byte
	// units counts data in UTF-16 code units; over says it passed the limit.
	units int
	over  bool
}

type oscState uint8

const (
	oscID oscState = iota
	oscPayload
	oscAbort
)

// oscPayloadLimit is xterm.js's PAYLOAD_LIMIT: the longest payload, in
// UTF-16 code units, an OSC (or DCS) handler is given.
const oscPayloadLimit = 10_000_000

// oscIDLimit bounds the identifier: none the model acts on is near it, and
// any longer identifier matches no handler in xterm.js either.
const oscIDLimit = 1 << 20

// oscKeepCap is the payload buffer's capacity kept between strings; a
// larger one, grown by a long title or link, is given back when its string
// ends.
const oscKeepCap = 4 << 10

// start begins a new OSC string.
func (o *oscReader) start() {
	o.state, o.id, o.keep, o.units, o.over = oscID, -1, false, 0, false
	o.data = o.data[:0]
}

// put reads one byte of the string (0x20 and above: a byte xterm.js's
// parser puts into the string).
func (o *oscReader) put(b byte) {
	switch o.state {
	case oscID:
		switch {
		case b == ';':
			o.state = oscPayload
			o.keep = oscHandlers[o.id] != nil
		case b >= '0' && b <= '9':
			o.id = min(max(o.id, 0)*10+int(b-'0'), oscIDLimit)
		default:
			o.state = oscAbort
		}
	case oscPayload:
		if o.over || !o.keep {
			return
		}
		o.units += utf16Units(b)
		if o.units > oscPayloadLimit {
			o.over, o.data = true, nil
			return
		}
		o.data = append(o.data, b)
	}
}

// end reports the string's identifier and payload, and ok false when the
// model runs no handler for it: aborted, an identifier without one, or a
// payload over the limit (xterm.js runs none either).
func (o *oscReader) end() (id int, payload []byte, ok bool) {
	if o.state == oscAbort || oscHandlers[o.id] == nil || o.over {
		return -1, nil, false
	}
	return o.id, o.data, true
}

// utf16Units is what byte b of valid UTF-8 adds to the text's length as a
// JavaScript string counts it: a code unit per character, two for one past
// U+FFFF (a four-byte character); continuation bytes add none.
func utf16Units(b byte) int {
	switch {
	case b < 0x80 || b&0xE0 == 0xC0 || b&0xF0 == 0xE0:
		return 1
	case b&0xF8 == 0xF0:
		return 2
	}
	return 0
}

// release gives back a payload buffer grown past oscKeepCap.
func (o *oscReader) release() {
	if cap(o.data) > oscKeepCap {
		o.data = nil
	}
}

// resume appends the string read so far as the identifier and payload that
// make xterm.js's OscParser read it alike: an aborted string, or one over
// the limit, as an identifier that aborts (nothing runs at its end).
func (o *oscReader) resume(p []byte) []byte {
	switch {
	case o.state == oscAbort || o.over:
		return append(p, 'x')
	case o.id >= 0:
		p = strconv.AppendInt(p, int64(o.id), 10)
	}
	if o.state == oscPayload {
		p = append(p, ';')
		p = append(p, o.data...)
	}
	return p
}
