package sitetools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Codes of an *ArgumentsError, as the agent error of a refused call carries them.
const (
	CodeArgumentsTooLarge = "arguments_too_large" // over MaxArgumentsBytes, or too much to check
	CodeArgumentsNotUTF8  = "arguments_not_utf8"  // raw bytes that are not UTF-8 text
	CodeInvalidArguments  = "invalid_arguments"   // not a JSON object, too deep, or against the schema
)

// ArgumentsError refuses a call's arguments as a whole, before the schema is applied: they are
// too large, are not UTF-8 text, or are not a JSON object within the nesting limit. Code says
// which (one of the Code constants); the Violation says where and what to do.
type ArgumentsError struct {
	Code string
	Violation
	// Ambiguous is true when the arguments could be read two ways: a property named twice in one
	// object (encoding/json keeps the last, other parsers the first, and the card shows both), or
	// a number a browser would read as another value than the one checked.
	Ambiguous bool
}

func (e *ArgumentsError) Error() string { return e.Violation.String() }

func argumentsErr(code, path, format string, args ...any) *ArgumentsError {
	return &ArgumentsError{Code: code, Violation: Violation{Path: path, Message: fmt.Sprintf(format, args...)}}
}

// decodeArguments reads an agent's arguments for validation. The text itself is checked first:
// its size, then that it is UTF-8, since the arguments travel to the browser as they were sent
// (json.RawMessage) while encoding/json would quietly replace bad bytes with U+FFFD in the copy
// validated here: the page would get what the server never checked, and Chromium fails the whole
// extension socket on a text frame that is not UTF-8.
func decodeArguments(args json.RawMessage) (any, *ArgumentsError) {
	args, err := checkText(args)
	if err != nil {
		return nil, err
	}
	return decodeValue(args, measure(args))
}

// checkText checks the arguments' size and that they are UTF-8, and returns them trimmed.
func checkText(args json.RawMessage) (json.RawMessage, *ArgumentsError) {
	args = bytes.TrimSpace(args)
	if len(args) > MaxArgumentsBytes {
		return nil, argumentsErr(CodeArgumentsTooLarge, "arguments", "are %d bytes; the limit is %d, so send less data", len(args), MaxArgumentsBytes)
	}
	if !utf8.Valid(args) {
		return nil, notUTF8(args)
	}
	if off := loneSurrogate(args); off >= 0 {
		path, _ := pathAt(args, off)
		return nil, argumentsErr(CodeArgumentsNotUTF8, path, "holds the escape %s (at byte %d of the arguments), half of a UTF-16 surrogate pair: it stands for no character, "+
			"and parsers disagree on what it is (the server reads U+FFFD, a browser a lone surrogate), so the person would approve other text than the page gets; "+
			"send the character itself, or both halves of its pair", args[off:off+6], off)
	}
	return args, nil
}

// loneSurrogate is the offset of the first \u escape in a JSON string that is half of a
// surrogate pair without the other half, or -1. Outside strings there are no escapes, and the
// scan only needs to tell strings apart; decoding checks the syntax.
func loneSurrogate(b []byte) int {
	inString := false
	for i := 0; i < len(b); i++ {
		switch {
		case !inString:
			inString = b[i] == '"'
		case b[i] == '"':
			inString = false
		case b[i] == '\\' && i+1 < len(b) && b[i+1] != 'u':
			i++ // a one-character escape, \\ included
		case b[i] == '\\':
			r := escapedUnit(b, i)
			switch {
			case r >= 0xd800 && r < 0xdc00 && escapedUnit(b, i+6) >= 0xdc00 && escapedUnit(b, i+6) < 0xe000:
				i += 11 // a whole pair
			case r >= 0xd800 && r < 0xe000:
				return i
			default:
				i += 5
			}
		}
	}
	return -1
}

// escapedUnit is the code unit of the \uXXXX escape at b[i:], or -1.
func escapedUnit(b []byte, i int) int {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return -1
	}
	n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// decodeValue decodes checked text into the value gojsonschema validates; sh is the text's
// measure.
func decodeValue(args json.RawMessage, sh shape) (any, *ArgumentsError) {
	if len(args) == 0 || string(args) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var value any
	// Nothing may follow the value: Decoder.More is false before a '}' or ']', so it let
	// {"a":1}]x through.
	if err := dec.Decode(&value); err != nil || dec.InputOffset() != int64(len(args)) {
		return nil, argumentsErr(CodeInvalidArguments, "arguments", "are not valid JSON; send a JSON object")
	}
	if _, ok := value.(map[string]any); !ok {
		return nil, argumentsErr(CodeInvalidArguments, "arguments", "must be a JSON object, got %s", describe(value))
	}
	// Decoding into maps keeps one member per name, so more members in the text (measure counts
	// them) than decoded mean some object names a property twice: the validator saw one value
	// (the last), the approval card's JSON shows both, and a page's parser may take either.
	if nestedDeeper(value, MaxArgumentDepth) {
		return nil, argumentsErr(CodeInvalidArguments, "arguments", "nest deeper than %d levels; flatten them", MaxArgumentDepth)
	}
	if sh.members != decodedMembers(value) { // decoding merged two members of one object
		path, key := duplicateKey(args)
		e := argumentsErr(CodeInvalidArguments, path, "has the property %q more than once; send each property once", key)
		e.Ambiguous = true
		return nil, e
	}
	if path := protoPath(value, "arguments"); path != "" {
		e := argumentsErr(CodeInvalidArguments, path, "has a property named \"__proto__\", which JavaScript reads two ways: JSON.parse makes it a property, "+
			"while a page that copies the arguments by assignment (Object.assign, obj[key] = value) makes its value the prototype, so every name inside it "+
			"would read as an argument the person never saw as one; rename it")
		e.Ambiguous = true
		return nil, e
	}
	return value, nil
}

// protoPath is the path of an object holding a property named __proto__
// (written plainly or with escapes), or "".
func protoPath(v any, path string) string {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["__proto__"]; ok {
			return path
		}
		for k, c := range t {
			seg := []pathFrame{{object: true, key: k}}
			var b strings.Builder
			writeSegment(&b, seg[0])
			if p := protoPath(c, path+b.String()); p != "" {
				return p
			}
		}
	case []any:
		for i, c := range t {
			if p := protoPath(c, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}

// decodedMembers counts the members of every object in a decoded value.
func decodedMembers(v any) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		n += len(t)
		for _, c := range t {
			n += decodedMembers(c)
		}
	case []any:
		for _, c := range t {
			n += decodedMembers(c)
		}
	}
	return n
}

// duplicateKey finds the first property named twice in one object: the object's path and the
// name (as decoded: "\u0061" and "a" are one name).
func duplicateKey(args []byte) (path, key string) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var stack []pathFrame
	var seen []map[string]bool
	for {
		tok, err := dec.Token()
		if err != nil {
			return "arguments", ""
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				seen = append(seen, map[string]bool{})
			case '}':
				seen = seen[:len(seen)-1]
			}
			stack = pushPop(stack, d)
			continue
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && !stack[top].keyed {
			k, _ := tok.(string)
			if seen[len(seen)-1][k] {
				return writePath(stack, false), k
			}
			seen[len(seen)-1][k] = true
			stack[top].key, stack[top].keyed = k, true
			continue
		}
		stack = advance(stack)
	}
}

// notUTF8 says where the first byte that is not UTF-8 is: the JSON path of the string (or
// property name) holding it, and its offset in the arguments as sent.
func notUTF8(args []byte) *ArgumentsError {
	off := firstInvalidUTF8(args)
	path, inKey := pathAt(args, off)
	where := "a string"
	if inKey {
		where = "a property name"
	}
	return argumentsErr(CodeArgumentsNotUTF8, path, "%s holds bytes that are not valid UTF-8 (at byte %d of the arguments); send text as UTF-8, and binary data encoded (base64, for example)", where, off)
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// pathFrame is one open container while pathAt walks the arguments.
type pathFrame struct {
	object bool
	key    string // the last property name read (objects)
	index  int    // the next item's index (arrays)
	keyed  bool   // a property name was read and its value is next (objects)
}

// pathAt walks the arguments' tokens up to byte off and writes the path of the value there, the
// way Violation paths are written (arguments.items[2].title); inKey says the byte is inside a
// property name, in which case the path is the object's. Keys are shown as encoding/json reads
// them (bad bytes as U+FFFD). A byte outside every string gives the innermost container's path.
func pathAt(args []byte, off int) (path string, inKey bool) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // a number no float64 holds (1e400) is still a token
	var stack []pathFrame
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return writePath(stack, false), false
		}
		past := dec.InputOffset() > int64(off)
		if d, ok := tok.(json.Delim); ok {
			if past {
				return writePath(stack, false), false
			}
			stack = pushPop(stack, d)
			continue
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && !stack[top].keyed {
			stack[top].key, stack[top].keyed = fmt.Sprint(tok), true
			if past {
				return writePath(stack, false), true
			}
			continue
		}
		if past {
			return writePath(stack, true), false
		}
		stack = advance(stack)
	}
}

// pushPop opens or closes a container; closing one counts it as its parent's value.
func pushPop(stack []pathFrame, d json.Delim) []pathFrame {
	switch d {
	case '{', '[':
		return append(stack, pathFrame{object: d == '{'})
	}
	return advance(stack[:len(stack)-1])
}

// advance moves past one value of the innermost container.
func advance(stack []pathFrame) []pathFrame {
	if top := len(stack) - 1; top >= 0 {
		if stack[top].object {
			stack[top].keyed = false
		} else {
			stack[top].index++
		}
	}
	return stack
}

// writePath spells the open containers' path; with value, down to the value being read in the
// innermost one, else only to the innermost container itself.
func writePath(stack []pathFrame, value bool) string {
	var b strings.Builder
	b.WriteString("arguments")
	n := len(stack)
	for i := 1; i < n || (value && i == n); i++ {
		writeSegment(&b, stack[i-1])
	}
	return b.String()
}

func writeSegment(b *strings.Builder, f pathFrame) {
	if !f.object {
		b.WriteString("[" + strconv.Itoa(f.index) + "]")
		return
	}
	if identifier.MatchString(f.key) {
		b.WriteString("." + f.key)
	} else {
		b.WriteString("[" + strconv.Quote(f.key) + "]")
	}
}

func nestedDeeper(v any, limit int) bool {
	if limit < 0 {
		return true
	}
	switch t := v.(type) {
	case map[string]any:
		for _, c := range t {
			if nestedDeeper(c, limit-1) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if nestedDeeper(c, limit-1) {
				return true
			}
		}
	}
	return false
}
