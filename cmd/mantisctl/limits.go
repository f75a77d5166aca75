package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// newLimitsCommand manages the concurrency limits: list, set and delete.
func newLimitsCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "List, set and delete concurrency limits (per target, per label value)",
		Long: "A concurrency limit caps the commands running at once, across deployments and Mandible replicas:\n" +
			"on one target (--scope target --value NAME), on every target (--scope target, the default\n" +
			api.DefaultTargetLimit + ", 1 unless changed), or on the targets whose label has a value\n" +
			"(--scope label --label env --value prod). Held requests wait, and show the limit as held_by.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newLimitsListCommand(f), newLimitsSetCommand(f), newLimitsDeleteCommand(f))
	return cmd
}

func newLimitsListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the concurrency limits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ls, err := c.ListLimits(cmd.Context())
			if err != nil {
				return err
			}
			return printLimits(cmd.OutOrStdout(), f.format, ls)
		},
	}
}

// printLimits prints ls as a table, or as data in format.
func printLimits(out io.Writer, format outputFormat, ls []api.Limit) error {
	if done, err := printListData(out, format, ls); done {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSCOPE\tLIMITS\tMAX RUNNING\tSET BY")
	for _, l := range ls {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", l.Name, l.Scope, safetext.Terminal(limitSubject(l)), l.MaxRunning, safetext.Terminal(l.CreatedBy))
	}
	return w.Flush()
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
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			l.Name = args[0]
			stored, err := c.SetLimit(cmd.Context(), l)
			if err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, stored)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "limit %s: at most %d running on %s\n", stored.Name, stored.MaxRunning, safetext.Terminal(limitSubject(stored)))
			return nil
		},
	}
	cmd.Flags().StringVar(&l.Scope, "scope", api.LimitScopeTarget, "target or label")
	cmd.Flags().StringVar(&l.Label, "label", "", "the label key (scope label)")
	cmd.Flags().StringVar(&l.Value, "value", "", "the label value (scope label), or the target's name (scope target; none for the default)")
	cmd.Flags().IntVar(&l.MaxRunning, "max-running", 0, "how many commands may run at once (1-100000)")
	_ = cmd.MarkFlagRequired("max-running")
	return cmd
}

func newLimitsDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a concurrency limit (the per-target default may be changed, not deleted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeleteLimit(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted limit %s\n", args[0])
			return nil
		},
	}
}
