package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
	"github.com/mantis-deploy/mantis/workers"
)

// defaultReplayLimit bounds a replay check unless --limit says otherwise.
const defaultReplayLimit = 1000

// errReplayFailed ends a replay check that found an execution the code would break;
// the report already named it.
var errReplayFailed = errors.New("open executions do not replay against this binary's workflows")

func newWorkflowsCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflows",
		Short: "Check Mantis's Temporal workflows against this binary (before an upgrade)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newReplayCheckCommand(f))
	return cmd
}

func newReplayCheckCommand(f *clientFlags) *cobra.Command {
	var (
		configPath string
		types      []string
		taskQueue  string
		limit      int
	)
	cmd := &cobra.Command{
		Use:   "replay-check",
		Short: "Replay the open Mantis workflows in the namespace against this binary's workflow code",
		Long: `replay-check lists the running executions of Mantis's workflows (` + strings.Join(workers.WorkflowTypes, ", ") + `)
in the namespace, fetches each one's history and replays it against the workflow code of this
mantisctl, registered as Mandible's workers register it. Run the mantisctl of the release you
are about to install: an execution that fails to replay would fail on the new workers (a
nondeterminism error) and stall. It prints ok, failed (with the first error) or not-started
(no workflow task completed yet, so nothing to compare) per execution, and exits 1 when one
failed or when more than --limit executions are open.

Temporal is reached as Mandible reaches it: the [temporal] section of Mandible's
configuration file (--config), with the MANTIS_TEMPORAL_* variables applied; its codec keys
decode encrypted payloads. The file's other sections are not checked.`,
		Example: "  mantisctl workflows replay-check --config /etc/mantis/mandible.toml\n" +
			"  mantisctl workflows replay-check --config mandible.toml --type Deployment --limit 5000",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return invalidInput(fmt.Errorf("--limit: must be at least 1, got %d", limit))
			}
			return replayCheck(cmd, configPath, workers.ReplayCheckOptions{Types: types, TaskQueue: taskQueue, Limit: limit}, f.format)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "Mandible's configuration file; its [temporal] section says how to reach Temporal (default: the defaults and MANTIS_TEMPORAL_* only)")
	cmd.Flags().StringSliceVar(&types, "type", nil, "check only these workflow types ("+strings.Join(workers.WorkflowTypes, ", ")+"; default all)")
	cmd.Flags().StringVar(&taskQueue, "task-queue", "", "check only the executions of this task queue")
	cmd.Flags().IntVar(&limit, "limit", defaultReplayLimit, "the most executions replayed; more open ones fail the check")
	return cmd
}

// replayCheck connects to Temporal as Mandible does and prints the replay report.
func replayCheck(cmd *cobra.Command, configPath string, opts workers.ReplayCheckOptions, format outputFormat) error {
	cfg, err := config.LoadMandibleTemporal(configPath, os.LookupEnv)
	var problems config.Errors
	switch {
	case errors.As(err, &problems):
		return invalidInput(fmt.Errorf("invalid configuration:\n%w", err))
	case err != nil:
		return invalidInput(err)
	}
	for _, t := range opts.Types {
		if !slices.Contains(workers.WorkflowTypes, t) {
			return invalidInput(fmt.Errorf("--type %s: not one of %s", t, strings.Join(workers.WorkflowTypes, ", ")))
		}
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	clientOpts, _, err := temporalclient.Options(cfg, logger)
	if err != nil {
		return err
	}
	c, err := client.DialContext(cmd.Context(), clientOpts)
	if err != nil {
		return fmt.Errorf("connecting to Temporal at %s: %w", clientOpts.HostPort, err)
	}
	defer c.Close()
	opts.Namespace, opts.DataConverter = clientOpts.Namespace, clientOpts.DataConverter
	report, err := workers.ReplayOpenExecutions(cmd.Context(), c, opts)
	if err != nil {
		return err
	}
	if format.structured() {
		err = printData(cmd.OutOrStdout(), format, report)
	} else {
		err = printReplayReport(cmd.OutOrStdout(), report)
	}
	if err != nil {
		return err
	}
	if n := report.Failed(); n > 0 {
		return fmt.Errorf("%d of %d: %w; do not upgrade until they close, or put the change behind workflow.GetVersion", n, len(report.Executions), errReplayFailed)
	}
	if report.Truncated {
		return fmt.Errorf("more than %d open executions: only the first %d were replayed; raise --limit", opts.Limit, opts.Limit)
	}
	return nil
}

// printReplayReport prints a line per execution, then each failure's error and a
// summary.
func printReplayReport(w io.Writer, r workers.ReplayReport) error {
	counts := map[string]int{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tTYPE\tWORKFLOW ID\tRUN ID\tEVENTS")
	for _, e := range r.Executions {
		counts[e.Result]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", e.Result, e.Type, e.WorkflowID, e.RunID, e.Events)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range r.Executions {
		if e.Error != "" {
			fmt.Fprintf(w, "\n%s (run %s):\n  %s\n", e.WorkflowID, e.RunID, strings.ReplaceAll(e.Error, "\n", "\n  "))
		}
	}
	_, err := fmt.Fprintf(w, "\n%d open executions in namespace %s replayed: %d %s, %d %s, %d %s\n", len(r.Executions), r.Namespace,
		counts[workers.ReplayOK], workers.ReplayOK, counts[workers.ReplayFailed], workers.ReplayFailed,
		counts[workers.ReplayNotStarted], workers.ReplayNotStarted)
	return err
}
