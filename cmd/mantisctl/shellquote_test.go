package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Several words after `run --` reach the command as typed: the shell the agent runs
// them with sees each word quoted.
func TestCommandLineQuotesEachOfSeveralWords(t *testing.T) {
	t.Parallel()
	args := []string{"printf", `a\000b|%s`, "it's $HOME"}
	line := commandLine(args)
	require.Equal(t, `printf 'a\000b|%s' 'it'\''s $HOME'`, line)

	got, err := exec.Command("/bin/sh", "-c", line).Output()
	require.NoError(t, err)
	require.Equal(t, "a\x00b|it's $HOME", string(got), "the shell passes each word on unchanged")
}

// One word is a shell command as it is: pipes and expansions work.
func TestCommandLineKeepsASingleWordAsAShellCommand(t *testing.T) {
	t.Parallel()
	line := commandLine([]string{"printf 'x\\ny\\n' | wc -l"})
	require.Equal(t, "printf 'x\\ny\\n' | wc -l", line)
	got, err := exec.Command("/bin/sh", "-c", line).Output()
	require.NoError(t, err)
	require.Equal(t, "2", string(trimSpace(got)))
}

func TestShellQuoteLeavesPlainWordsBare(t *testing.T) {
	t.Parallel()
	require.Equal(t, "systemctl restart nginx.service --now", commandLine([]string{"systemctl", "restart", "nginx.service", "--now"}))
	require.Equal(t, "'a b'", shellQuote("a b"))
	require.Equal(t, "'*'", shellQuote("*"))
	require.Equal(t, "echo ''", commandLine([]string{"echo", ""}), "an empty word stays a word")
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
