package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters (OWASP's minimum: 19 MiB, 2 passes, 1 lane). Stored with
// each hash, so they can rise later without breaking old hashes.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
)

// hashPassword returns a PHC-style argon2id string.
func hashPassword(pw string) string {
	salt := make([]byte, 16)
	rand.Read(salt)
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

var errBadHash = errors.New("server: malformed password hash")

// Bounds on the parameters a stored hash may carry: room for the ones above
// to rise, but never a hash that runs for minutes, takes gigabytes, panics
// the argon2 package (no passes, no lanes) or matches every password (an
// empty key). A stored hash is data read back, so it is checked as any other
// input before it is run.
const (
	hashMaxMemory  = 1 << 20 // KiB: 1 GiB
	hashMaxTime    = 16
	hashMaxThreads = 16
	hashMinSalt    = 8
	hashMaxSalt    = 64
	hashMinKey     = 16
	hashMaxKey     = 64
)

// argonHash is a stored hash's parts.
type argonHash struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

// String is the PHC form hashPassword writes.
func (h argonHash) String() string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, h.memory, h.time, h.threads,
		base64.RawStdEncoding.EncodeToString(h.salt), base64.RawStdEncoding.EncodeToString(h.key))
}

// parseHash reads a hash in exactly the form hashPassword writes, with its
// parameters within the bounds above; anything else is errBadHash with what
// is wrong.
func parseHash(hash string) (argonHash, error) {
	var h argonHash
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return h, fmt.Errorf("%w: not $argon2id$v=…$m=…,t=…,p=…$salt$key", errBadHash)
	}
	if parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return h, fmt.Errorf("%w: version %.20q, not v=%d", errBadHash, parts[2], argon2.Version)
	}
	params := strings.Split(parts[3], ",")
	if len(params) != 3 {
		return h, fmt.Errorf("%w: parameters %.40q, not m=…,t=…,p=…", errBadHash, parts[3])
	}
	m, err1 := hashParam(params[0], "m=", hashMaxMemory)
	t, err2 := hashParam(params[1], "t=", hashMaxTime)
	p, err3 := hashParam(params[2], "p=", hashMaxThreads)
	if err := errors.Join(err1, err2, err3); err != nil {
		return h, fmt.Errorf("%w: %w", errBadHash, err)
	}
	if m < 8*p { // argon2 needs 8 KiB per lane
		return h, fmt.Errorf("%w: m=%d is under 8 KiB for each of p=%d lanes", errBadHash, m, p)
	}
	h.memory, h.time, h.threads = uint32(m), uint32(t), uint8(p)
	var err error
	if h.salt, err = unbase64(parts[4]); err != nil || len(h.salt) < hashMinSalt || len(h.salt) > hashMaxSalt {
		return h, fmt.Errorf("%w: the salt must be %d to %d bytes of unpadded base64", errBadHash, hashMinSalt, hashMaxSalt)
	}
	if h.key, err = unbase64(parts[5]); err != nil || len(h.key) < hashMinKey || len(h.key) > hashMaxKey {
		return h, fmt.Errorf("%w: the key must be %d to %d bytes of unpadded base64", errBadHash, hashMinKey, hashMaxKey)
	}
	return h, nil
}

// unbase64 decodes unpadded base64 in the one spelling hashPassword writes.
// Go's decoder skips CR and LF wherever they are, even in Strict mode, so a
// hash with a line break in its salt or key would be taken as the hash
// without it.
func unbase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("a line break in base64")
	}
	return base64.RawStdEncoding.Strict().DecodeString(s)
}

// hashParam reads one "x=N" with 1 <= N <= max, in decimal without sign or
// leading zeros.
func hashParam(s, prefix string, max uint64) (uint64, error) {
	v, ok := strings.CutPrefix(s, prefix)
	n, err := strconv.ParseUint(v, 10, 32)
	if !ok || err != nil || n < 1 || n > max || strconv.FormatUint(n, 10) != v {
		return 0, fmt.Errorf("parameter %.20q must be %sN with N from 1 to %d", s, prefix, max)
	}
	return n, nil
}

// checkPassword reports whether pw matches a hash made by hashPassword.
func checkPassword(hash, pw string) (bool, error) {
	h, err := parseHash(hash)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(got, h.key) == 1, nil
}

// dummyHash is checked against when an account does not exist, so sign-in
// takes as long for an unknown address as for a wrong password.
var dummyHash = hashPassword("tabbridge-no-such-account")
