// Package safetext turns bytes from outside Mantis (command output, error text,
// reasons) into text that every store and screen accepts: valid UTF-8 without NUL,
// bounded in length. It is the one place that does so, and it imports nothing of
// Mantis, so the schema layer, Thorax, the agent and mantisctl can all use it.
package safetext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// NULReplacement stands for a NUL byte in display text: PostgreSQL's text and jsonb
// refuse NUL, and U+2400 (SYMBOL FOR NULL) still shows the reader that one was there.
const NULReplacement = '\u2400'

// TruncatedMarker ends a text cut by Bound; the number of bytes cut follows it.
const TruncatedMarker = "…[truncated "

// MaxErrorBytes bounds the error text of a command result at every hop (agent,
// Thorax, Mandible): enough for any real message, small enough for events and logs.
const MaxErrorBytes = 8 << 10

// MaxReasonBytes bounds a redispatch reason.
const MaxReasonBytes = 4 << 10

// Display returns raw as valid UTF-8 without NUL: each NUL becomes NULReplacement and
// each byte that is not part of valid UTF-8 becomes U+FFFD. Everything else, control
// characters and escape sequences included, is kept; Terminal makes text safe to print.
func Display(raw []byte) string {
	if utf8.Valid(raw) && !containsNUL(raw) {
		return string(raw)
	}
	var b strings.Builder
	b.Grow(len(raw) + 16)
	for len(raw) > 0 {
		r, size := utf8.DecodeRune(raw)
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteRune(utf8.RuneError)
		case r == 0:
			b.WriteRune(NULReplacement)
		default:
			b.Write(raw[:size])
		}
		raw = raw[size:]
	}
	return b.String()
}

// DisplayString is Display for bytes held in a string.
func DisplayString(raw string) string {
	if utf8.ValidString(raw) && !strings.ContainsRune(raw, 0) {
		return raw
	}
	return Display([]byte(raw))
}

func containsNUL(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return true
		}
	}
	return false
}

// Tail returns the last n bytes of raw, unchanged, or raw when it is shorter.
func Tail(raw []byte, n int) []byte {
	if n < 0 {
		n = 0
	}
	if len(raw) <= n {
		return raw
	}
	return raw[len(raw)-n:]
}

// DisplayTail returns the display text of the last n bytes of raw. A cut through a
// UTF-8 sequence drops the sequence's leftover continuation bytes instead of showing
// them as U+FFFD.
func DisplayTail(raw []byte, n int) string {
	if len(raw) <= n {
		return Display(raw)
	}
	t := Tail(raw, n)
	for i := 0; i < len(t) && i < utf8.UTFMax-1 && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	return Display(t)
}

// Bound returns s as display text of at most max bytes. Longer text keeps its start,
// where a message says what went wrong, and ends with TruncatedMarker and the number
// of bytes cut, so a long error is shortened rather than refused.
func Bound(s string, max int) string {
	s = DisplayString(s)
	if len(s) <= max {
		return s
	}
	marker := func(cut int) string { return TruncatedMarker + strconv.Itoa(cut) + " bytes]" }
	keep := max - len(marker(len(s)))
	if keep <= 0 {
		return cutAt(s, max)
	}
	keep = runeStartAtOrBefore(s, keep)
	return s[:keep] + marker(len(s)-keep)
}

// cutAt returns the longest prefix of s of at most n bytes that ends on a rune boundary.
func cutAt(s string, n int) string {
	return s[:runeStartAtOrBefore(s, n)]
}

// runeStartAtOrBefore returns the largest i <= n where a rune of s starts.
func runeStartAtOrBefore(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// Unstorable says why PostgreSQL's text and jsonb could not hold s as it is, or
// whether it passes limit bytes; it returns "" for text that may be stored. Input
// that is refused rather than cleaned (a command, a name) is checked with it, so the
// refusal names the problem instead of failing the insert.
func Unstorable(s string, limit int) string {
	switch {
	case len(s) > limit:
		return fmt.Sprintf("at most %d bytes, got %d", limit, len(s))
	case !utf8.ValidString(s):
		return "must be UTF-8 text"
	case strings.IndexByte(s, 0) >= 0:
		return `must not contain NUL (\u0000)`
	}
	return ""
}
