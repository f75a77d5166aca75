package safetext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Terminal returns text safe to write to a terminal: newlines and tabs are kept, and
// every other control character (C0, DEL, C1: escape sequences, carriage returns,
// bells, backspaces) is written as a visible escape such as \x1b or \u009b, so output
// cannot move the cursor, recolour, retitle or rewrite what the user reads. Invalid
// UTF-8 and NUL are shown as Display shows them. A carriage return that ends a line
// ("\r\n") is dropped rather than shown.
func Terminal(s string) string {
	s = strings.ReplaceAll(DisplayString(s), "\r\n", "\n")
	if !strings.ContainsFunc(s, unsafeForTerminal) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		switch {
		case !unsafeForTerminal(r):
			b.WriteRune(r)
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func unsafeForTerminal(r rune) bool {
	switch {
	case r == '\n', r == '\t':
		return false
	case r < 0x20, r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	}
	return false
}
