package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// newLimitsCommand manages the concurrency limits: list, set and delete.
func newLimitsCommand(f *clientFlags) *cobra.Command {
	return commandGroup("limits", "List, set and delete concurrency limits (per target, per label value)",
		"A concurrency limit caps the commands running at once, across deployments and Mandible replicas:\n"+
			"on one target (--scope target --value NAME), on every target (--scope target, the default\n"+
			api.DefaultTargetLimit+", 1 unless changed), or on the targets whose label has a value\n"+
			"(--scope label --label env --value prod). Held requests wait, and show the limit as held_by.",
		listCommand(f, "List the concurrency limits", apiclient.Limits.List, printLimits),
		newLimitsSetCommand(f),
		deleteCommand(f, "delete NAME", "Delete a concurrency limit (the per-target default may be changed, not deleted)",
			"limit", apiclient.Limits.Delete))
}

// printLimits prints ls as a table, or as data in format.
func printLimits(out io.Writer, format outputFormat, ls []api.Limit) error {
	return printTable(out, format, ls, "NAME\tSCOPE\tLIMITS\tMAX RUNNING\tSET BY", func(w io.Writer, l api.Limit) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", l.Name, l.Scope, safetext.Terminal(limitSubject(l)), l.MaxRunning, safetext.Terminal(l.CreatedBy))
	})
}

// limitSubject says in words what l limits.
func limitSubject(l api.Limit) string {
	switch {
	case l.Scope == api.LimitScopeLabel:
		return "targets with " + l.Label + "=" + l.Value
	case l.Value == "":
		return "every target (default)"
	default:
		return "target " + l.Value
	}
}

func newLimitsSetCommand(f *clientFlags) *cobra.Command {
	var l api.Limit
	cmd := &cobra.Command{
		Use:   "set NAME --scope target|label [--label KEY] [--value VALUE] --max-running N",
		Short: "Set a concurrency limit (or change the one of that name)",
		Args:  cobra.ExactArgs(1),
		RunE: createRunE(f, nameArg(&l, &l.Name), apiclient.Limits.Create, func(out io.Writer, stored api.Limit) {
			fmt.Fprintf(out, "limit %s: at most %d running on %s\n", stored.Name, stored.MaxRunning, safetext.Terminal(limitSubject(stored)))
		}),
	}
	cmd.Flags().StringVar(&l.Scope, "scope", api.LimitScopeTarget, "target or label")
	cmd.Flags().StringVar(&l.Label, "label", "", "the label key (scope label)")
	cmd.Flags().StringVar(&l.Value, "value", "", "the label value (scope label), or the target's name (scope target; none for the default)")
	cmd.Flags().IntVar(&l.MaxRunning, "max-running", 0, "how many commands may run at once (1-100000)")
	_ = cmd.MarkFlagRequired("max-running")
	return cmd
}
