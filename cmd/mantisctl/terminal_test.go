package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

func longStep() *stepProgress {
	return &stepProgress{name: "install-the-new-release-everywhere", status: "running", total: 1200, running: 300, succeeded: 700, failed: 100, queued: 100}
}

// On a terminal of 80 columns a step's line never reaches the last column: the bar
// shrinks, then the line is cut with an ellipsis.
func TestProgressLineFitsTheTerminal(t *testing.T) {
	t.Parallel()
	p := longStep()
	require.Greater(t, utf8.RuneCountInString(p.line(progressBarWidth)), 80, "the line as printed to a pipe is wider")
	for _, width := range []int{80, 60, 40, 20} {
		l := p.fitLine(width)
		require.LessOrEqual(t, utf8.RuneCountInString(l), width-1, "width %d: %q", width, l)
	}
	require.True(t, strings.HasSuffix(p.fitLine(40), ellipsis))
	require.Equal(t, p.line(progressBarWidth), p.fitLine(200), "a wide terminal gets the whole line")
}

// The redraw on a terminal writes lines that fit, and a pipe gets plain lines: no
// carriage return, no escape sequence.
func TestWatchRendersForTerminalAndPipe(t *testing.T) {
	t.Parallel()
	var tty bytes.Buffer
	w := newWatch(&tty, api.Deployment{}, outputText)
	w.tty, w.width = true, 80
	w.steps = []*stepProgress{longStep(), {name: "restart", status: "pending", total: 2}}
	w.render()
	w.render()
	for _, l := range strings.Split(strings.TrimSuffix(tty.String(), "\n"), "\n") {
		l = strings.TrimPrefix(l, "\x1b[2A")
		require.True(t, strings.HasPrefix(l, "\x1b[2K"), "each line is cleared first: %q", l)
		require.LessOrEqual(t, utf8.RuneCountInString(strings.TrimPrefix(l, "\x1b[2K")), 79, "%q", l)
	}

	var pipe bytes.Buffer
	w = newWatch(&pipe, api.Deployment{}, outputText)
	require.False(t, w.tty)
	w.steps = []*stepProgress{longStep()}
	w.render()
	w.steps[0].succeeded++
	w.render()
	require.Equal(t, 2, strings.Count(pipe.String(), "\n"), "one line per change")
	require.NotContains(t, pipe.String(), "\r")
	require.NotContains(t, pipe.String(), "\x1b")
}

func TestTerminalWidthFallsBackToColumns(t *testing.T) {
	t.Setenv("COLUMNS", "132")
	require.Equal(t, 132, terminalWidth(&bytes.Buffer{}))
	t.Setenv("COLUMNS", "")
	require.Equal(t, defaultTerminalWidth, terminalWidth(&bytes.Buffer{}))
}
