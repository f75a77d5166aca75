package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// What a command printed reaches the terminal only as text: escape sequences, bells,
// backspaces and carriage returns are shown escaped, newlines and tabs kept.
func TestSummaryPrintsOutputTailsSafelyForATerminal(t *testing.T) {
	t.Parallel()
	exit := 2
	summary := "exit 2; last output: \"\x1b[2J\""
	d := api.Deployment{Name: "hostile", Status: "failed", Steps: []api.Step{{
		Name: "print", Status: "failed", Targets: []api.TargetResult{{
			Target: "web-1", Status: "failed", ExitCode: &exit, Error: "bad\x07",
			OutputTail: "first\tline\n\x1b]0;owned\x07\x1b[31mred\r\nover\rwrite\x08\u009b\n",
			Analysis:   &api.Analysis{Status: "done", Summary: &summary},
		}},
	}}}
	var out bytes.Buffer
	printDeploymentSummary(&out, d)
	got := out.String()
	requireTerminalSafe(t, got)
	require.Contains(t, got, "first\tline\n")
	require.Contains(t, got, `\x1b]0;owned\x07\x1b[31mred`)
	require.Contains(t, got, `over\x0dwrite\x08\u009b`)
	require.Contains(t, got, `bad\x07`)
	require.Contains(t, got, `last output: "\x1b[2J"`)
}

func requireTerminalSafe(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		require.False(t, r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f), "control character %U printed in %q", r, s)
	}
	require.False(t, strings.ContainsRune(s, 0))
}

// `mantisctl get` names the token that created the deployment.
func TestSummaryNamesWhoCreatedTheDeployment(t *testing.T) {
	t.Parallel()
	by := "ci"
	var out bytes.Buffer
	printDeploymentSummary(&out, api.Deployment{Name: "release", Status: "running", CreatedBy: &by})
	require.Contains(t, out.String(), "created by ci")
}
