package sitetools

import (
	"bytes"
	"strconv"
	"strings"
)

// exactDigits is how many significant digits every float64 in its normal range keeps: a
// decimal with at most this many digits is read back as itself (DBL_DIG), so measure checks
// only numbers with more, or with a large exponent.
const exactDigits = 15

// keptByFloat reports whether the float64 a browser's JSON.parse makes of a number is the
// number itself: the shortest decimal that reads back as that float64 (what JavaScript shows
// of it) has the same value as the text. 9007199254740993 becomes 9007199254740992 and
// 1.00000000000000001 becomes 1; 1e2, 0.10 and 5e-324 are kept. The validator checks the text
// exactly and the card shows it as written, so a number not kept would run as another value
// than the one checked and approved. Text ParseFloat refuses is left to the other checks:
// decoding refuses what is not a number, heldByFloat what is out of range.
func keptByFloat(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return true
	}
	var buf [32]byte
	return sameDecimal(num, strconv.AppendFloat(buf[:0], f, 'e', -1, 64))
}

// browserReading writes f as JavaScript's Number.prototype.toString does, which is how a page
// (and the agent's own JavaScript) would show the value it got: plain decimals from 1e-6 to
// 1e21, exponent notation outside (TestNumbersAsV8ReadsThem compares it with V8's).
func browserReading(f float64) string {
	if f == 0 {
		return "0" // -0 too, as String(-0) writes it
	}
	if a := max(f, -f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + digits
}

// sameDecimal reports whether two JSON numbers have the same value (zeros of either sign are
// one value, as == compares them in JavaScript). It allocates nothing for numbers of up to 64
// digits: measure runs it on every long number of the arguments.
func sameDecimal(a, b []byte) bool {
	var abuf, bbuf [64]byte
	an, ad, ae, aok := decimalOf(a, abuf[:0])
	bn, bd, be, bok := decimalOf(b, bbuf[:0])
	if !aok || !bok {
		return string(a) == string(b)
	}
	if len(ad) == 0 || len(bd) == 0 {
		return len(ad) == len(bd)
	}
	return an == bn && string(ad) == string(bd) && ae == be
}

// decimalOf reads a JSON number as 0.digits × 10^exp: its sign, its significant digits without
// leading or trailing zeros (none for zero), appended to buf, and the exponent. ok is false
// for text that is not a number or whose exponent does not fit an int.
func decimalOf(num, buf []byte) (neg bool, digits []byte, exp int, ok bool) {
	neg = len(num) > 0 && num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant := num
	if i := bytes.IndexAny(num, "eE"); i >= 0 {
		n, err := strconv.Atoi(string(num[i+1:]))
		if err != nil {
			return false, nil, 0, false
		}
		mant, exp = num[:i], n
	}
	point := false
	for _, c := range mant {
		switch {
		case c == '.' && !point:
			point = true
		case c < '0' || c > '9':
			return false, nil, 0, false
		case c == '0' && len(buf) == 0: // a leading zero
			if point {
				exp--
			}
		default:
			buf = append(buf, c)
			if !point {
				exp++
			}
		}
	}
	return neg, bytes.TrimRight(buf, "0"), exp, true
}

// inexactNumber refuses the arguments for the number at byte off, which a browser reads as
// another value, saying which.
func inexactNumber(args []byte, off int) *ArgumentsError {
	end := off + 1
	for end < len(args) && strings.IndexByte("0123456789.eE+-", args[end]) >= 0 {
		end++
	}
	num := string(args[off:end])
	f, _ := strconv.ParseFloat(num, 64)
	reads := browserReading(f)
	written := num
	if len(written) > 40 {
		written = written[:32] + "… (" + strconv.Itoa(len(num)) + " characters)"
	}
	path, _ := pathAt(args, off)
	e := argumentsErr(CodeInvalidArguments, path, "is the number %s (at byte %d of the arguments), and a browser reads it as %s: a float64 does not hold it exactly, "+
		"so the page would act on another value than the one checked and shown to the person. Send %s if that is what you mean; "+
		"send an id or an exact amount as a string where the tool takes one", written, off, reads, reads)
	e.Ambiguous = true
	return e
}
