package main

import (
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// defaultTerminalWidth is the width assumed of a terminal that does not say.
const defaultTerminalWidth = 80

// ellipsis ends a line cut to fit the terminal.
const ellipsis = "…"

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// terminalWidth is the number of columns of the terminal w writes to: what the
// terminal says, else $COLUMNS, else defaultTerminalWidth.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return defaultTerminalWidth
}

// fitWidth cuts s to at most width-1 characters, ending it with an ellipsis when cut:
// a line that fills the last column would wrap on some terminals, and a wrapped line
// breaks redrawing in place.
func fitWidth(s string, width int) string {
	limit := width - 1
	if limit < 1 || utf8.RuneCountInString(s) <= limit {
		return s
	}
	runes := []rune(s)
	return string(runes[:limit-1]) + ellipsis
}
