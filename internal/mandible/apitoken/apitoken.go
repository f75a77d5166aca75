// Package apitoken is the HTTP API's bearer tokens: each has a name and a scope, and
// Mandible keeps only its SHA-256 hash, read from a token file that can be re-read
// while Mandible runs so that a revoked token stops working without a restart.
package apitoken

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
)

// Scope is what a token may do. Each scope includes the ones below it:
// admin implies deploy, which implies read.
type Scope string

// The scopes, weakest first; ScopeHelp says what each allows.
const (
	// ScopeRead reads: every GET under /api/v1 but those of the dead-letter queue
	// and of webhooks, and the event streams under /sse.
	ScopeRead Scope = "read"
	// ScopeDeploy also creates, cancels, resumes and re-runs deployments, takes the
	// decisions they wait for, and enqueues dispatch requests.
	ScopeDeploy Scope = "deploy"
	// ScopeAdmin also writes the fleet's settings (targets, limits, freezes,
	// schedules, webhooks), reads webhooks and the dead-letter queue, requeues and
	// purges it, and overrides freezes.
	ScopeAdmin Scope = "admin"
)

// ScopeHelp says what each scope allows, as the route table of
// internal/mandible/httpapi enforces it; a test there holds the GET routes it names
// to the scope they need.
const ScopeHelp = `Each scope includes the ones before it:
  read    every GET under /api/v1 (deployments, their output and decisions, dispatch
          requests, targets, Thorax instances, limits, freezes, schedules) and the
          event streams under /sse, but not the dead-letter queue nor webhooks:
          GET /api/v1/dlq, GET /api/v1/webhooks, GET /api/v1/webhooks/{id} and
          GET /api/v1/webhooks/{id}/failures need admin.
  deploy  also create (and dry-run), cancel, resume and re-run deployments, take the
          decisions they wait for, and enqueue dispatch requests.
  admin   also register and deregister targets; set and delete limits; create and
          delete freezes and schedules; create, read and delete webhooks and read
          their failed deliveries; list, requeue and purge the dead-letter queue;
          override a freeze (override_freeze=true).`

var scopeRank = map[Scope]int{ScopeRead: 1, ScopeDeploy: 2, ScopeAdmin: 3}

// Valid reports whether s is one of the three scopes.
func (s Scope) Valid() bool { return scopeRank[s] > 0 }

// Covers reports whether a token of scope s may do what needs scope need.
func (s Scope) Covers(need Scope) bool { return s.Valid() && scopeRank[s] >= scopeRank[need] }

// Token is one accepted token: its name (recorded on every write it makes), its scope
// and the SHA-256 of its secret.
type Token struct {
	Name   string
	Scope  Scope
	SHA256 [sha256.Size]byte
}

// Hash returns the SHA-256 of a token's secret, as stored in a token file.
func Hash(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// HashHex is Hash in hexadecimal, the form of a token file's sha256 key.
func HashHex(secret string) string {
	h := Hash(secret)
	return hex.EncodeToString(h[:])
}

// secretPrefix marks Mantis API tokens, so that secret scanners can recognise one.
const secretPrefix = "mantis_"

// NewSecret returns a new random token secret (32 random bytes).
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Legacy turns the deprecated flat http.tokens list into admin tokens named
// "legacy-1", "legacy-2", ... in list order.
func Legacy(secrets []string) []Token {
	out := make([]Token, len(secrets))
	for i, s := range secrets {
		out[i] = Token{Name: fmt.Sprintf("legacy-%d", i+1), Scope: ScopeAdmin, SHA256: Hash(s)}
	}
	return out
}

// Keyring is the set of tokens the API accepts; Replace swaps it atomically, so a
// re-read token file takes effect for the next request.
type Keyring struct {
	tokens atomic.Pointer[[]Token]
}

// NewKeyring returns a keyring holding tokens.
func NewKeyring(tokens []Token) *Keyring {
	k := &Keyring{}
	k.Replace(tokens)
	return k
}

// Replace makes tokens the accepted set.
func (k *Keyring) Replace(tokens []Token) {
	cp := append([]Token(nil), tokens...)
	k.tokens.Store(&cp)
}

// Len is how many tokens the keyring holds.
func (k *Keyring) Len() int { return len(*k.tokens.Load()) }

// Lookup returns the token whose hash matches secret. Every stored hash is compared,
// in constant time, whether or not an earlier one matched.
func (k *Keyring) Lookup(secret string) (Token, bool) {
	h := Hash(secret)
	var (
		found Token
		ok    bool
	)
	for _, t := range *k.tokens.Load() {
		if subtle.ConstantTimeCompare(h[:], t.SHA256[:]) == 1 && !ok {
			found, ok = t, true
		}
	}
	return found, ok
}

// FileLine is a token file entry for secret, in TOML, for a user to paste.
func FileLine(name string, scope Scope, secret string) string {
	return fmt.Sprintf("[[tokens]]\nname = %q\nscope = %q\nsha256 = %q\n", name, string(scope), HashHex(secret))
}

// validName reports whether name can name a token: 1-64 characters of letters,
// digits, '-', '_', '.', '@'.
func validName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	return strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.@", r))
	}) < 0
}
