package bridge

import (
	"bytes"
	"strconv"
)

// jsonSpace is the white space JSON allows between tokens.
const jsonSpace = " \t\r\n"

// A socket's reader waits in a read for hours, and Go does not shrink the
// stack of a goroutine blocked that deep below half of what it grew to: a
// reader whose stack grew once to 8 KiB keeps 8 KiB for the socket's life,
// twice what it needs to wait (issue 16, docs/BENCHMARKS.md "Memory per idle
// browser"). So the reader runs only what is shallow or on a call's path
// itself; the socket's one-time start (the hello's database calls, the
// sign-in follower's check) and the rare frames that decode deep (sites,
// tools, documents) run on a short-lived goroutine it waits for, whose stack
// goes with it. The frame an idle browser sends, a ping every 20 s, is
// parsed and answered without encoding/json (pingID, encodePong); a call's
// dispatch and result stay on the reader, so a call pays no goroutine start
// and no extra wake-up.

// OffStack runs f on a short-lived goroutine and waits for it to return, so
// the stack f grows is freed with that goroutine rather than kept by the
// caller's. A panic in f is raised again in the caller.
func OffStack(f func()) {
	var (
		p        any
		panicked = true
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if panicked {
				p = recover()
			}
		}()
		f()
		panicked = false
	}()
	<-done
	if panicked {
		panic(p)
	}
}

// offReader reports whether a frame is handled off the reader's stack: the
// rare frames that decode deep and touch the catalog (sites.open,
// tools.announce, document.used, document.gone). The test is on the frame's
// start, where the extension writes the type; any other frame — a call's
// dispatch and result above all, whatever the order of their members — is
// handled on the reader, and a frame misjudged is handled all the same, only
// on the other goroutine.
func offReader(frame []byte) bool {
	for _, prefix := range [...]string{`{"type":"sites.`, `{"type":"tools.`, `{"type":"document.`} {
		if len(frame) > len(prefix) && string(frame[:len(prefix)]) == prefix {
			return true
		}
	}
	return false
}

// pingID reports whether frame is a ping in the shape the extension sends,
// {"type":"ping","id":"p12"} (its two members in either order, each once, no
// spaces but around the object, the id at most maxIDLen printable ASCII
// characters with no escapes), and its id. For such a frame Decode gives
// {Type: ping, ID: id} too; every other frame, pings of other shapes
// included, goes to Decode.
func pingID(frame []byte) (string, bool) {
	frame = bytes.TrimRight(bytes.TrimLeft(frame, jsonSpace), jsonSpace)
	n := len(frame)
	if n < 2 || frame[0] != '{' || frame[n-1] != '}' {
		return "", false
	}
	b := frame[1 : n-1]
	var id []byte
	haveType, haveID := false, false
	for {
		key, rest, ok := plainString(b)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return "", false
		}
		val, rest, ok := plainString(rest[1:])
		if !ok {
			return "", false
		}
		switch string(key) {
		case "type":
			if haveType || string(val) != TypePing {
				return "", false
			}
			haveType = true
		case "id":
			if haveID || len(val) > maxIDLen {
				return "", false
			}
			haveID, id = true, val
		default:
			return "", false
		}
		if len(rest) == 0 {
			return string(id), haveType
		}
		if rest[0] != ',' {
			return "", false
		}
		b = rest[1:]
	}
}

// plainString reads a JSON string at the start of b made of printable ASCII
// other than '\\' (so with no escapes, and nothing for Decode to reject), and
// returns its content and what follows it.
func plainString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// encodePong is encode(pongMsg{Type: TypePong, ID: id, Time: ms}), byte for
// byte, without encoding/json for an id encoding/json copies as it is.
func encodePong(id string, ms int64) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return encode(pongMsg{Type: TypePong, ID: id, Time: ms})
		}
	}
	b := make([]byte, 0, 40+len(id))
	b = append(b, `{"type":"pong"`...)
	if id != "" {
		b = append(b, `,"id":"`...)
		b = append(b, id...)
		b = append(b, '"')
	}
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, ms, 10)
	return append(b, '}')
}
