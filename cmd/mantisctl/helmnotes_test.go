package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// templateAction is a Helm template action, {{ ... }}, in the chart's NOTES.
var templateAction = regexp.MustCompile(`\{\{[^}]*\}\}`)

// valueFlags are mantisctl's global flags that take a value.
var valueFlags = map[string]bool{"--server": true, "--token-file": true, "--client-config": true, "--context": true, "-o": true, "--output": true}

// Every mantisctl command the Helm chart's NOTES tell an operator to run exists: its
// words, run with --help, name a command whose usage starts with them (so that
// `mantisctl get targets`, which --help would show as `get ID`, fails).
func TestHelmNotesNameRealCommands(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "mantis", "templates", "NOTES.txt"))
	require.NoError(t, err)
	var seen int
	for _, line := range strings.Split(string(b), "\n") {
		words := strings.Fields(templateAction.ReplaceAllString(line, "x"))
		if len(words) == 0 || words[0] != "mantisctl" {
			continue
		}
		seen++
		var path []string
		for i := 1; i < len(words); i++ {
			switch w := words[i]; {
			case valueFlags[w]:
				i++
			case strings.HasPrefix(w, "-"):
			default:
				path = append(path, w)
			}
		}
		r := mantisctl(t, append(append([]string(nil), path...), "--help")...)
		requireCode(t, ExitOK, r)
		usage := regexp.MustCompile(`(?m)^  (mantisctl.*)$`).FindStringSubmatch(r.stdout)
		require.NotNil(t, usage, "%q: no usage line in its help", line)
		require.True(t, strings.HasPrefix(usage[1]+" ", "mantisctl "+strings.Join(path, " ")+" "),
			"NOTES line %q: mantisctl's usage is %q", strings.TrimSpace(line), usage[1])
	}
	require.NotZero(t, seen, "the NOTES name no mantisctl command")
}
