package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/spec"
)

func newScheduleCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Create, list and delete deployment schedules (Temporal Schedules)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newScheduleCreateCommand(f), newScheduleListCommand(f), newScheduleDeleteCommand(f))
	return cmd
}

func newScheduleCreateCommand(f *clientFlags) *cobra.Command {
	var file string
	var body api.NewSchedule
	cmd := &cobra.Command{
		Use:   "create NAME --spec FILE (--cron EXPR | --every DURATION)",
		Short: "Start a deployment spec on a cron expression (UTC) or at an interval",
		Example: `  mantisctl schedule create nightly --spec deploy/examples/nightly.yaml --cron "0 3 * * *"
  mantisctl schedule create hourly-check --spec check.yaml --every 1h`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := os.ReadFile(file)
			if err != nil {
				return invalidInput(fmt.Errorf("reading spec: %w", err))
			}
			if _, err := spec.Parse(raw); err != nil {
				return invalidInput(err)
			}
			asJSON, err := yaml.YAMLToJSON(raw)
			if err != nil {
				return invalidInput(fmt.Errorf("reading spec: %w", err))
			}
			body.Name, body.Spec = args[0], json.RawMessage(asJSON)
			c, err := f.client()
			if err != nil {
				return err
			}
			created, err := c.CreateSchedule(cmd.Context(), body)
			if err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, created)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s created (Temporal schedule %s)\n", created.Name, created.ScheduleID)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "spec", "", "the deployment spec file (YAML or JSON)")
	cmd.Flags().StringVar(&body.Cron, "cron", "", "a five-field cron expression, in UTC")
	cmd.Flags().StringVar(&body.Every, "every", "", "an interval such as 1h or 30m")
	_ = cmd.MarkFlagRequired("spec")
	cmd.MarkFlagsOneRequired("cron", "every")
	cmd.MarkFlagsMutuallyExclusive("cron", "every")
	return cmd
}

func newScheduleListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the deployment schedules with their next and last runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ss, err := c.ListSchedules(cmd.Context())
			if err != nil {
				return err
			}
			return printSchedules(cmd.OutOrStdout(), f.format, ss)
		},
	}
}

// printSchedules prints ss as a table, or as data in format.
func printSchedules(out io.Writer, format outputFormat, ss []api.Schedule) error {
	if done, err := printListData(out, format, ss); done {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tWHEN\tDEPLOYMENT\tNEXT RUN\tLAST RUN\tPAUSED")
	for _, s := range ss {
		when := "cron " + s.Cron
		if s.Every != "" {
			when = "every " + s.Every
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%t\n", s.Name, safetext.Terminal(when), safetext.Terminal(s.Deployment),
			firstTime(s.NextRuns, false), firstTime(s.RecentRuns, true), s.Paused)
	}
	return w.Flush()
}

// firstTime is the first (or last) of ts, or "-".
func firstTime(ts []time.Time, last bool) string {
	if len(ts) == 0 {
		return "-"
	}
	t := ts[0]
	if last {
		t = ts[len(ts)-1]
	}
	return t.UTC().Format(time.RFC3339)
}

func newScheduleDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a deployment schedule (runs already started go on)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted schedule %s\n", strings.TrimSpace(args[0]))
			return nil
		},
	}
}
