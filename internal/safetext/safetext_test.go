package safetext_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/safetext"
)

func TestDisplayReplacesNULAndInvalidBytesAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	raw := []byte("a\x00b\xff\xfe é \x1b[31mred\x1b[0m\n")
	got := safetext.Display(raw)
	require.True(t, utf8.ValidString(got))
	require.NotContains(t, got, "\x00")
	require.Equal(t, "a\u2400b\uFFFD\uFFFD é \x1b[31mred\x1b[0m\n", got)
	require.Equal(t, "plain", safetext.Display([]byte("plain")))
	require.Equal(t, got, safetext.DisplayString(string(raw)))
}

func TestDisplayTailStartsOnARuneAndIsBounded(t *testing.T) {
	t.Parallel()
	raw := []byte(strings.Repeat("é", 10)) // 20 bytes
	got := safetext.DisplayTail(raw, 5)    // cuts through the first kept é
	require.Equal(t, "éé", got)
	require.Equal(t, []byte("é"), safetext.Tail(raw, 2))
	require.Equal(t, "x\u2400", safetext.DisplayTail([]byte("x\x00"), 10))
}

func TestBoundTruncatesWithAMarkerAndNeverExceedsTheLimit(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 1000) + "\x00\xff"
	got := safetext.Bound(long, 100)
	require.LessOrEqual(t, len(got), 100)
	require.True(t, utf8.ValidString(got))
	require.True(t, strings.HasPrefix(got, "éé"))
	require.Contains(t, got, safetext.TruncatedMarker)
	require.Equal(t, "short \u2400", safetext.Bound("short \x00", 100))
	require.LessOrEqual(t, len(safetext.Bound(long, 5)), 5)
	require.True(t, utf8.ValidString(safetext.Bound(long, 5)))
}

func TestTerminalEscapesControlCharactersButNewlinesAndTabs(t *testing.T) {
	t.Parallel()
	got := safetext.Terminal("ok\tline\n\x1b]0;title\x07\r\x08\u009bX\x7f\xff\x00")
	require.Equal(t, "ok\tline\n\\x1b]0;title\\x07\\x0d\\x08\\u009bX\\x7f\uFFFD\u2400", got)
	require.Equal(t, "plain é\n", safetext.Terminal("plain é\n"))
	require.Equal(t, "crlf\nline\\x0d", safetext.Terminal("crlf\r\nline\r"))
}
