package server

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCheckPasswordRefusesForgedHashes: a stored hash is read back as
// untrusted data. One with no key matched every password; one with no
// passes or no lanes panicked inside argon2; one asking for 4 TiB or a
// billion passes never returned. Each is now refused as malformed, at once.
func TestCheckPasswordRefusesForgedHashes(t *testing.T) {
	salt := "c2FsdHNhbHRzYWx0c2FsdA"              // 16 bytes
	key := "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5" // 27 bytes
	for name, hash := range map[string]string{
		"empty key":        "$argon2id$v=19$m=64,t=1,p=1$" + salt + "$",
		"no passes":        "$argon2id$v=19$m=64,t=0,p=1$" + salt + "$" + key,
		"no lanes":         "$argon2id$v=19$m=64,t=1,p=0$" + salt + "$" + key,
		"4 TiB":            "$argon2id$v=19$m=4294967295,t=1,p=1$" + salt + "$" + key,
		"a billion passes": "$argon2id$v=19$m=64,t=1000000000,p=1$" + salt + "$" + key,
		"trailing words":   "$argon2id$v=19$m=64,t=1,p=1junk$" + salt + "$" + key,
		"other version":    "$argon2id$v=16$m=64,t=1,p=1$" + salt + "$" + key,
		"empty salt":       "$argon2id$v=19$m=64,t=1,p=1$$" + key,
		"argon2i":          "$argon2i$v=19$m=64,t=1,p=1$" + salt + "$" + key,
		"signed":           "$argon2id$v=19$m=+64,t=1,p=1$" + salt + "$" + key,
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			var ok bool
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = nil
						t.Fatalf("checkPassword(%q) panicked: %v", hash, r)
					}
				}()
				ok, err = checkPassword(hash, "any password at all")
			}()
			if ok || !errors.Is(err, errBadHash) {
				t.Fatalf("checkPassword(%q) = %v, %v; want errBadHash", hash, ok, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("checkPassword(%q) took %v", hash, d)
			}
		})
	}
	good := hashPassword("right horse battery")
	if ok, err := checkPassword(good, "right horse battery"); !ok || err != nil {
		t.Fatalf("the server's own hash: %v, %v", ok, err)
	}
	if ok, err := checkPassword(good, "wrong"); ok || err != nil {
		t.Fatalf("a wrong password: %v, %v", ok, err)
	}
}

// FuzzParseHash: a stored password hash is accepted only in the exact form
// hashPassword writes (it re-encodes to the same text) with parameters that
// keep argon2 bounded in time and memory and a key that is not empty; any
// other is errBadHash with words saying what is wrong.
func FuzzParseHash(f *testing.F) {
	f.Add(hashPassword("seed password"))
	f.Add(dummyHash)
	f.Add("$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$")
	f.Add("$argon2id$v=19$m=4294967295,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5")
	f.Add("$argon2id$v=19$m=64,t=0,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5")
	f.Add("$argon2id$v=19$m=064,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5")
	f.Add("")
	f.Add("$$$$$")
	f.Fuzz(func(t *testing.T, hash string) {
		h, err := parseHash(hash)
		if err != nil {
			if !errors.Is(err, errBadHash) || !strings.Contains(err.Error(), ": ") {
				t.Fatalf("parseHash(%q) error %v does not say what is wrong", hash, err)
			}
			return
		}
		if h.memory < 8 || h.memory > hashMaxMemory || h.time < 1 || h.time > hashMaxTime || h.threads < 1 || h.threads > hashMaxThreads ||
			h.memory < 8*uint32(h.threads) || len(h.salt) < hashMinSalt || len(h.salt) > hashMaxSalt || len(h.key) < hashMinKey || len(h.key) > hashMaxKey {
			t.Fatalf("parseHash(%q) accepted %+v, out of bounds", hash, h)
		}
		if again := h.String(); again != hash {
			t.Fatalf("parseHash(%q) re-encodes as %q", hash, again)
		}
	})
}
