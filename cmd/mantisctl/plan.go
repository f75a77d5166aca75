package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// maxPlanNames bounds the target names a plan prints per batch.
const maxPlanNames = 10

// planDeployment prints what the spec would do if created now; nothing changes.
func planDeployment(cmd *cobra.Command, f *clientFlags, c *apiclient.Client, body []byte) error {
	plan, err := c.PlanDeployment(cmd.Context(), body)
	if err != nil {
		return err
	}
	if f.format.structured() {
		return printData(cmd.OutOrStdout(), f.format, plan)
	}
	printPlan(cmd.OutOrStdout(), plan)
	return nil
}

// printPlan writes a plan for people.
func printPlan(out io.Writer, p api.DeploymentPlan) {
	fmt.Fprintf(out, "plan of %s (%s priority): %d targets, nothing created\n", safetext.Terminal(p.Name), p.Priority, len(p.Targets))
	for _, s := range p.Steps {
		fmt.Fprintf(out, "step %d %s: %s\n", s.Position, safetext.Terminal(s.Name), safetext.Terminal(safetext.Bound(s.Command, 80)))
		for i, b := range s.Batches {
			fmt.Fprintf(out, "  batch %d (%d): %s\n", i+1, len(b), namesText(b))
		}
	}
	if len(p.Offline) > 0 {
		fmt.Fprintf(out, "offline now (%d; their commands wait for a live Thorax): %s\n", len(p.Offline), namesText(p.Offline))
	}
	for _, l := range p.Limits {
		fmt.Fprintf(out, "limit %s: at most %d running, covers %d targets\n", l.Name, l.MaxRunning, l.Targets)
	}
	for _, fz := range p.Freezes {
		fmt.Fprintf(out, "FROZEN by %s (%s): %d targets, e.g. %s; deploying needs --override-freeze and an admin token\n",
			fz.Name, safetext.Terminal(fz.Reason), fz.Targets, fz.FirstTarget)
	}
}

// namesText lists names, the first maxPlanNames of them.
func namesText(names []string) string {
	if len(names) <= maxPlanNames {
		return safetext.Terminal(strings.Join(names, ", "))
	}
	return safetext.Terminal(strings.Join(names[:maxPlanNames], ", ")) + fmt.Sprintf(", ... (%d more)", len(names)-maxPlanNames)
}
