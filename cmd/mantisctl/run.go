package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// runFlags are the flags of `mantisctl run`.
type runFlags struct {
	targets        []string
	selector       map[string]string
	priority       string
	timeout        time.Duration
	watchTimeout   time.Duration
	idempotencyKey string
}

func newRunCommand(f *clientFlags) *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run --targets a,b -- COMMAND...",
		Short: "Run one command on targets as an ad-hoc one-step deployment, watched, with each target's output",
		Long: `run runs one command on targets as a one-step deployment and watches it (exit codes as
watch's). A single word after -- is a shell command as it is ('ls | wc -l'); several
words are each quoted for the shell, so they reach the command as typed.`,
		Example: `  mantisctl run --targets web-1,web-2 -- uptime
  mantisctl run --selector role=web -- systemctl status nginx
  mantisctl run --targets web-1 -- 'journalctl -u nginx | tail -5'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := spec.Deployment{
				Name: "run-" + time.Now().UTC().Format("20060102-150405"), Priority: rf.priority,
				Targets: rf.targets, TargetSelector: rf.selector,
				Steps: []spec.Step{{Name: "run", Command: commandLine(args), Timeout: rf.timeout.String()}},
			}
			d.IdempotencyKey = rf.idempotencyKey
			if !cmd.Flags().Changed("idempotency-key") {
				d.IdempotencyKey = defaultIdempotencyKey(os.Getenv, d)
			}
			if err := d.Validate(); err != nil {
				return invalidInput(err)
			}
			return runDeployment(cmd, f, rf, d)
		},
	}
	cmd.Flags().StringSliceVar(&rf.targets, "targets", nil, "target names, comma-separated")
	cmd.Flags().StringToStringVar(&rf.selector, "selector", nil, "pick targets by labels key=value")
	cmd.Flags().StringVar(&rf.priority, "priority", "normal", "high, normal or low")
	cmd.Flags().DurationVar(&rf.timeout, "timeout", 10*time.Minute, "command timeout")
	cmd.Flags().DurationVar(&rf.watchTimeout, "watch-timeout", 0, "give up waiting after this long and exit 6 (0: no limit)")
	cmd.Flags().StringVar(&rf.idempotencyKey, "idempotency-key", "", "create at most one deployment for this key (default in CI: see mantisctl --help; '' for none)")
	_ = cmd.RegisterFlagCompletionFunc("targets", completeTargetNames(f))
	return cmd
}

// runDeployment creates the run's deployment, sending its idempotency key, and
// watches it.
func runDeployment(cmd *cobra.Command, f *clientFlags, rf runFlags, d spec.Deployment) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	body, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding the run's deployment: %w", err)
	}
	creator := c
	if d.IdempotencyKey != "" {
		creator = withHeader(c, idempotencyHeader, d.IdempotencyKey)
	}
	created, err := creator.CreateDeployment(cmd.Context(), body)
	if err != nil {
		return err
	}
	printCreateWarnings(cmd, created)
	out := cmd.OutOrStdout()
	if !created.Created && f.format == outputText {
		fmt.Fprintf(out, "deployment %s exists (same idempotency key %q): watching it\n", created.ID, d.IdempotencyKey)
	}
	werr := watchDeployment(cmd.Context(), out, c, created.ID.String(), watchOptions{format: f.format, timeout: rf.watchTimeout})
	if f.format == outputText {
		printRunOutputs(cmd, c, created)
	}
	return werr
}

// printRunOutputs prints each target's exit code and output tail.
func printRunOutputs(cmd *cobra.Command, c *apiclient.Client, created api.CreatedDeployment) {
	view, _, err := c.Deployment(cmd.Context(), created.ID.String())
	if err != nil || len(view.Steps) == 0 {
		return
	}
	printTargetOutputs(cmd.OutOrStdout(), view.Steps[0].Targets)
}

// printTargetOutputs prints each target's exit code and output tail, by target name.
func printTargetOutputs(out io.Writer, ts []api.TargetResult) {
	ts = append([]api.TargetResult(nil), ts...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Target < ts[j].Target })
	for _, t := range ts {
		code := "-"
		if t.ExitCode != nil {
			code = fmt.Sprint(*t.ExitCode)
		}
		fmt.Fprintf(out, "\n--- %s (exit %s)\n%s", t.Target, code, safetext.Terminal(t.OutputTail))
		if t.Truncated {
			fmt.Fprint(out, "\n[output cut: showing the tail]")
		}
		fmt.Fprintln(out)
	}
}
