package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/notifyd/notifyd/sdk/wire"
)

// tokens holds the SHA-256 of every configured bearer token. Comparing
// digests keeps the comparison constant-time in the token's length too
// (subtle.ConstantTimeCompare returns early on a length mismatch), and the
// tokens themselves are not kept in memory longer than the config is.
type tokens struct {
	digests [][sha256.Size]byte
}

func newTokens(configured []string) tokens {
	var t tokens
	for _, tok := range configured {
		if tok == "" {
			continue // an unset ${VAR}: never let "" authenticate
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(tok)))
	}
	return t
}

func (t tokens) empty() bool { return len(t.digests) == 0 }

// check accepts "Authorization: Bearer <token>" for a configured token. It
// compares against every token without stopping at a match, so the time it
// takes does not say which token (or how much of one) matched.
func (t tokens) check(r *http.Request) *Error {
	h := r.Header.Get("Authorization")
	scheme, presented, ok := strings.Cut(h, " ")
	if h == "" {
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing Authorization header; want \"Authorization: Bearer <token>\" with a token from http.tokens")
	}
	presented = strings.TrimSpace(presented)
	if !ok || !strings.EqualFold(scheme, "Bearer") || presented == "" {
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "Authorization header is not \"Bearer <token>\"")
	}
	if t.empty() {
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "no API tokens are configured (http.tokens); the API refuses every request")
	}
	d := sha256.Sum256([]byte(presented))
	match := 0
	for i := range t.digests {
		match |= subtle.ConstantTimeCompare(d[:], t.digests[i][:])
	}
	if match != 1 {
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "bearer token is not one of http.tokens")
	}
	return nil
}
