package sitetools

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// shape is what the cost model needs of the arguments, read from their text before they are
// decoded (decoding is part of the work bounded): how many values sit at each depth, the root
// being depth 0. Values deeper than MaxArgumentDepth count at that depth; such arguments are
// refused anyway.
type shape struct {
	values  [MaxArgumentDepth + 1]int64
	numbers [MaxArgumentDepth + 1]float64 // the work of parsing each number there once, summed
	total   int64
	// members counts the members of every object, which decodeValue compares with the decoded
	// value's (a property named twice).
	members int
	huge    int // offset of the first number too long to check, or -1
	// unheld is the offset of the first number a float64 cannot hold (it would be read as
	// Infinity, or as 0 though it is not), or -1.
	unheld int
	// inexact is the offset of the first number a float64 holds only approximately: a browser
	// reads 9007199254740993 as 9007199254740992, or -1.
	inexact int
}

// Limits on one number in the arguments. gojsonschema parses every number as a big.Rat each time
// a subschema applies to it, and that grows faster than the text: one number of a million digits
// takes seconds, 1e-1000000 tens of milliseconds. Past these limits a number is refused (an agent
// can send it as a string); below them its cost is counted (numberWork).
const (
	MaxNumberDigits   = 1000
	MaxNumberExponent = 10000
)

// measure counts the values at each depth in one pass over JSON text, the members of its
// objects, and what their numbers cost. It does not check the syntax (decoding does, after); on
// text that is not JSON the counts are only an estimate.
func measure(text []byte) shape {
	s := shape{huge: -1, unheld: -1, inexact: -1}
	if len(text) == 0 {
		return s
	}
	s.count(0)
	var kinds bitStack // per open container: is it an object
	depth, inString, escaped, opened, openedObject := 0, false, false, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if opened && c != '}' && c != ']' {
			s.count(depth) // the first member or item of a container
		}
		if (openedObject && c != '}') || (c == ',' && kinds.top()) {
			s.members++ // an object's first member, or its next
		}
		opened, openedObject = false, false
		switch c {
		case '"':
			inString = true
		case '{', '[':
			kinds.push(c == '{')
			depth++
			opened, openedObject = true, c == '{'
		case '}', ']':
			kinds.pop()
			depth = max(depth-1, 0)
		case ',':
			s.count(depth)
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			i = s.number(text, i, depth) - 1
		}
	}
	return s
}

// number reads the number starting at i, adds its work at depth, and returns where it ends.
func (s *shape) number(text []byte, i, depth int) int {
	start, digits, exp, inExp := i, 0, 0, false
	for ; i < len(text); i++ {
		c := text[i]
		switch {
		case c >= '0' && c <= '9' && inExp:
			exp = min(exp*10+int(c-'0'), 1<<30)
		case c >= '0' && c <= '9':
			digits++
		case c == 'e' || c == 'E':
			inExp = true
		case c == '-' || c == '+' || c == '.':
		default:
			s.addNumber(text[start:i], start, depth, digits, exp)
			return i
		}
	}
	s.addNumber(text[start:], start, depth, digits, exp)
	return i
}

func (s *shape) addNumber(num []byte, start, depth, digits, exp int) {
	if (digits > MaxNumberDigits || exp > MaxNumberExponent) && s.huge < 0 {
		s.huge = start
	}
	if digits+exp > 290 && s.unheld < 0 && !heldByFloat(num) { // below, every number is within range
		s.unheld = start
	}
	if (digits > exactDigits || exp > 290) && s.inexact < 0 && !keptByFloat(num) { // below, every number is kept
		s.inexact = start
	}
	s.numbers[min(depth, MaxArgumentDepth)] += numberWork(digits, exp)
}

// heldByFloat reports whether a float64, which is what a browser's JSON.parse makes of every
// number, holds the number at least approximately: 1e400 becomes Infinity and 1e-400 becomes 0,
// so a page would act on another value than the one validated (exactly, as a big.Rat) and shown
// to the person — {"exclusiveMinimum": 0} passes 1e-400, and the page gets 0.
func heldByFloat(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	if errors.Is(err, strconv.ErrRange) {
		return false
	}
	if err != nil || f != 0 {
		return true // not a number (decoding refuses it), or held
	}
	mantissa, _, _ := bytes.Cut(bytes.ToLower(num), []byte("e"))
	return len(bytes.Trim(mantissa, "-+.0")) == 0 // 0e5 is 0
}

// numberWork is what parsing a number once as a big.Rat costs, in checks, fitted to measurements
// (BenchmarkValidateCostliest, "big-numbers"): it grows with the square of the digits and, since
// 1e-N is 10^N made exactly, faster than linearly with the exponent.
func numberWork(digits, exp int) float64 {
	d, e := float64(digits), float64(exp)
	return 1 + d*d/7500 + e*math.Sqrt(e)/1000
}

func (s *shape) count(depth int) {
	s.values[min(depth, MaxArgumentDepth)]++
	s.total++
}

// bitStack is a stack of booleans, one bit each; the first 256 need no allocation.
type bitStack struct {
	n     int
	fixed [4]uint64
	more  []uint64
}

func (b *bitStack) push(v bool) {
	w, bit := b.n/64, uint64(1)<<(b.n%64)
	if w >= len(b.fixed) && w-len(b.fixed) >= len(b.more) {
		b.more = append(b.more, 0)
	}
	word := b.word(w)
	if v {
		*word |= bit
	} else {
		*word &^= bit
	}
	b.n++
}

func (b *bitStack) pop() {
	if b.n > 0 {
		b.n--
	}
}

// top is the last value pushed and not popped, false when none is.
func (b *bitStack) top() bool {
	if b.n == 0 {
		return false
	}
	i := b.n - 1
	return *b.word(i / 64)>>(i%64)&1 != 0
}

func (b *bitStack) word(w int) *uint64 {
	if w < len(b.fixed) {
		return &b.fixed[w]
	}
	return &b.more[w-len(b.fixed)]
}

// work is the cost of checking arguments of this shape and size against the schema, in checks.
func (s *Schema) work(sh shape, size int) float64 {
	total := weightValue*float64(sh.total) + weightByte*float64(size)
	for k, n := range sh.values {
		if n == 0 || k >= len(s.cost.perValue) {
			continue
		}
		// Every value at depth k together holds at most size bytes; a number is parsed by each
		// subschema applied to it, and again by each numeric keyword (weightNumber covers that).
		// Deeper values cost more: every error carries its path, which gojsonschema and we build.
		deeper := 1 + float64(k)/MaxArgumentDepth
		total += float64(n)*s.cost.perValue[k]*deeper + float64(size)*s.cost.perByte[k]
		total += sh.numbers[k] * s.cost.applied[k] * numberParses
	}
	return total
}

// numberParses is how often gojsonschema may parse a number for one subschema: its type, then a
// minimum or maximum and multipleOf.
const numberParses = 3

// withinBudget refuses arguments whose cost against this schema is over MaxValidationCost,
// saying how many values the schema allows, so the agent can split its call.
func (s *Schema) withinBudget(args []byte, sh shape) *ArgumentsError {
	if sh.huge >= 0 {
		path, _ := pathAt(args, sh.huge)
		return argumentsErr(CodeArgumentsTooLarge, path, "is a number too long to check (at byte %d of the arguments): at most %d digits and an exponent of at most %d are allowed; send it as a string", sh.huge, MaxNumberDigits, MaxNumberExponent)
	}
	if sh.unheld >= 0 {
		path, _ := pathAt(args, sh.unheld)
		e := argumentsErr(CodeInvalidArguments, path, "is a number outside what a browser holds (at byte %d of the arguments): the page would read it as Infinity or 0; send a number between ±1.7e308 that is not closer to 0 than 5e-324, or send it as a string", sh.unheld)
		e.Ambiguous = true
		return e
	}
	if sh.inexact >= 0 {
		return inexactNumber(args, sh.inexact)
	}
	w := s.work(sh, len(args))
	if w <= MaxValidationCost {
		return nil
	}
	allowed := int64(math.Floor(float64(sh.total) * MaxValidationCost / w))
	return argumentsErr(CodeArgumentsTooLarge, "arguments", "hold %s, too many to check against this tool's input schema in one call: it allows about %s; send fewer values (split the work over several calls)",
		count(int(sh.total), "value"), approx(allowed))
}

// approx rounds a count down to two significant digits, since the allowance is an estimate.
func approx(n int64) string {
	if n < 100 {
		return fmt.Sprint(max(n, 0))
	}
	p := int64(math.Pow10(int(math.Log10(float64(n))) - 1))
	return fmt.Sprint(n / p * p)
}
