package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// newScheduleCommand manages deployment schedules: create, list and delete.
func newScheduleCommand(f *clientFlags) *cobra.Command {
	return commandGroup("schedule", "Create, list and delete deployment schedules (Temporal Schedules)", "",
		newScheduleCreateCommand(f),
		listCommand(f, "List the deployment schedules with their next and last runs", apiclient.Schedules.List, printSchedules),
		argCommand[struct{}]{
			use:   "delete NAME",
			short: "Delete a deployment schedule (runs already started go on)",
			call:  noAnswer(apiclient.Schedules.Delete),
			show: func(out io.Writer, _ outputFormat, name string, _ struct{}) error {
				fmt.Fprintf(out, "deleted schedule %s\n", strings.TrimSpace(name))
				return nil
			},
		}.command(f))
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
		RunE: createRunE(f, func(args []string) (api.NewSchedule, error) {
			asJSON, err := readSpecAsJSON(file)
			if err != nil {
				return body, err
			}
			body.Name, body.Spec = args[0], asJSON
			return body, nil
		}, apiclient.Schedules.Create, func(out io.Writer, created api.Schedule) {
			fmt.Fprintf(out, "schedule %s created (Temporal schedule %s)\n", created.Name, created.ScheduleID)
		}),
	}
	cmd.Flags().StringVar(&file, "spec", "", "the deployment spec file (YAML or JSON)")
	cmd.Flags().StringVar(&body.Cron, "cron", "", "a five-field cron expression, in UTC")
	cmd.Flags().StringVar(&body.Every, "every", "", "an interval such as 1h or 30m")
	_ = cmd.MarkFlagRequired("spec")
	cmd.MarkFlagsOneRequired("cron", "every")
	cmd.MarkFlagsMutuallyExclusive("cron", "every")
	return cmd
}

// readSpecAsJSON reads the deployment spec in file (YAML or JSON), checks it and
// returns it as JSON; its errors are the caller's input.
func readSpecAsJSON(file string) (json.RawMessage, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, invalidInput(fmt.Errorf("reading spec: %w", err))
	}
	if _, err := spec.Parse(raw); err != nil {
		return nil, invalidInput(err)
	}
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, invalidInput(fmt.Errorf("reading spec: %w", err))
	}
	return json.RawMessage(asJSON), nil
}

// printSchedules prints ss as a table, or as data in format.
func printSchedules(out io.Writer, format outputFormat, ss []api.Schedule) error {
	return printTable(out, format, ss, "NAME\tWHEN\tDEPLOYMENT\tNEXT RUN\tLAST RUN\tPAUSED", func(w io.Writer, s api.Schedule) {
		when := "cron " + s.Cron
		if s.Every != "" {
			when = "every " + s.Every
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%t\n", s.Name, safetext.Terminal(when), safetext.Terminal(s.Deployment),
			firstTime(s.NextRuns, false), firstTime(s.RecentRuns, true), s.Paused)
	})
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
