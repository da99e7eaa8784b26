// Package secret makes and hashes the bearer secrets Tabbridge hands out:
// agent and machine tokens, refresh tokens, tickets and invitation links.
//
// A secret is 256 random bits, shown once, and stored only as its SHA-256
// hash: the secrets are high-entropy, so a fast hash is enough and a lookup
// by hash is a plain indexed equality. It does not handle passwords (those
// are low-entropy and use argon2id in server).
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// New returns a fresh secret with the given prefix (which says what kind of
// secret it is to a person who finds it in a log or a config file) and the
// hash to store in its place.
func New(prefix string) (plain, hash string) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("secret: crypto/rand failed: " + err.Error()) // rand.Read never fails on supported platforms
	}
	plain = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return plain, Hash(plain)
}

// Hash returns the stored form of a secret.
func Hash(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}
