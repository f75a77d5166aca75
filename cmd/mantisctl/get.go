package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// newGetCommand shows one deployment.
func newGetCommand(f *clientFlags) *cobra.Command {
	return argCommand[api.Deployment]{
		use:      "get ID",
		short:    "Show a deployment: steps and per-target results with exit code, output tail and analysis",
		complete: completeDeploymentIDs(f),
		call: func(c *apiclient.Client, ctx context.Context, id string) (api.Deployment, error) {
			d, _, err := c.Deployment(ctx, id)
			return d, err
		},
		show: func(out io.Writer, format outputFormat, _ string, d api.Deployment) error {
			return printResult(out, format, d, printDeploymentSummary)
		},
	}.command(f)
}

// printDeploymentSummary prints the final state: each step with its counts, and each failed
// target with its exit code, output tail and analysis. Text that a command or an agent
// wrote is printed through safetext.Terminal.
func printDeploymentSummary(out io.Writer, d api.Deployment) {
	fmt.Fprintf(out, "\ndeployment %s %s\n", d.Name, strings.ToUpper(d.Status))
	if d.CreatedBy != nil {
		fmt.Fprintf(out, "  created by %s\n", safetext.Terminal(*d.CreatedBy))
	}
	if d.Error != nil {
		fmt.Fprintf(out, "  %s\n", safetext.Terminal(*d.Error))
	}
	for _, s := range d.Steps {
		fmt.Fprintf(out, "  step %-16s %-10s %d succeeded, %d failed\n", s.Name, s.Status, s.Counts.Succeeded, s.Counts.Failed)
		for _, t := range s.Targets {
			if t.Status != "failed" {
				continue
			}
			code := "-"
			if t.ExitCode != nil {
				code = fmt.Sprint(*t.ExitCode)
			}
			fmt.Fprintf(out, "    %s: exit %s %s\n", t.Target, code, safetext.Terminal(t.Error))
			if tail := lastLines(safetext.Terminal(t.OutputTail), 5); tail != "" {
				fmt.Fprintf(out, "      %s\n", strings.ReplaceAll(tail, "\n", "\n      "))
			}
			if a := t.Analysis; a != nil && a.Summary != nil {
				fmt.Fprintf(out, "      analysis: %s\n", safetext.Terminal(*a.Summary))
				if a.Suggestion != nil {
					fmt.Fprintf(out, "      try: %s\n", safetext.Terminal(*a.Suggestion))
				}
			}
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
