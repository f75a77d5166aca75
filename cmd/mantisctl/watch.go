package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// Bounds of the wait for failed targets' analyses once a deployment ended.
const (
	analysisPolls    = 20
	analysisPollWait = 150 * time.Millisecond
)

// maxWatchedSteps bounds the steps an event may create: a step position past it is
// not a step of a real spec.
const maxWatchedSteps = 1000

// summaryLineType is the type of the last line of `watch -o jsonl`: its data is the
// deployment as it ended.
const summaryLineType = "summary"

// eventLine is one line of `watch -o jsonl`: an event of the deployment's stream as
// it arrived, or the final summary.
type eventLine struct {
	ID   string          `json:"id,omitempty"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// watchOptions says how to follow a deployment.
type watchOptions struct {
	format outputFormat
	// timeout bounds the wait for the deployment to end; zero waits as long as it takes.
	timeout time.Duration
	// output prints the targets' live output between the progress lines.
	output bool
}

func newWatchCommand(f *clientFlags) *cobra.Command {
	var timeout time.Duration
	var output bool
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a deployment live: one line per step with its progress; exits 0 only on success",
		Long: `watch follows a deployment until it ends, then prints its summary. It exits 0 when the
deployment succeeded, 1 when it failed, 3 when it was cancelled and 6 when --timeout
passed first. -o json and -o yaml print the deployment as it ended; -o jsonl prints
each event as it arrives, one JSON object per line, then a line of type "summary"
whose data is the deployment as it ended. --follow-output prints the targets' output as
it is written, each line prefixed with its target's name, between the progress lines.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDeploymentIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return watchDeployment(cmd.Context(), cmd.OutOrStdout(), c, args[0], watchOptions{format: f.format, timeout: timeout, output: output})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long and exit 6 (0: no limit)")
	cmd.Flags().BoolVar(&output, "follow-output", false, "print the targets' output as it is written, prefixed with their names")
	return cmd
}

// watchDeployment follows a deployment's events until it ends, then prints it. It
// fails with errDeploymentFailed or errDeploymentCancelled unless the deployment
// succeeded, and with errWatchTimedOut when opts.timeout passed first.
func watchDeployment(ctx context.Context, out io.Writer, c *apiclient.Client, id string, opts watchOptions) error {
	if opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, opts.timeout, errWatchTimedOut)
		defer cancel()
	}
	err := followDeployment(ctx, out, c, id, opts)
	if err != nil && errors.Is(context.Cause(ctx), errWatchTimedOut) {
		return fmt.Errorf("watching deployment %s for %s: %w", id, opts.timeout, errWatchTimedOut)
	}
	return err
}

func followDeployment(ctx context.Context, out io.Writer, c *apiclient.Client, id string, opts watchOptions) error {
	format := opts.format
	d, links, err := c.Deployment(ctx, id)
	if err != nil {
		return err
	}
	w := newWatch(out, d, format)
	if opts.output {
		w.followOutput()
		defer w.lines.flush()
	}
	if format == outputText {
		fmt.Fprintf(out, "deployment %s (%s)\n", d.Name, d.ID)
		if u := links[api.LinkTemporal]; u != "" {
			fmt.Fprintf(out, "temporal: %s\n", u)
		}
	}
	final := d.Status
	if !terminal(final) {
		if final, err = w.follow(ctx, c, id); err != nil {
			return err
		}
	}
	if d, err = deploymentWithAnalyses(ctx, c, id); err != nil {
		return err
	}
	if err := printFinal(out, format, d); err != nil {
		return err
	}
	return outcome(final, d.Status)
}

// printFinal prints the deployment as it ended in format.
func printFinal(out io.Writer, format outputFormat, d api.Deployment) error {
	switch format {
	case outputText:
		printDeploymentSummary(out, d)
		return nil
	case outputJSONL:
		data, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("encoding the summary: %w", err)
		}
		return json.NewEncoder(out).Encode(eventLine{Type: summaryLineType, Data: data})
	}
	return printData(out, format, d)
}

// outcome is the error a watch ends with: none when the deployment succeeded.
func outcome(final, status string) error {
	switch {
	case final == domain.DeploymentSucceeded || status == domain.DeploymentSucceeded:
		return nil
	case final == domain.DeploymentCancelled || status == domain.DeploymentCancelled:
		return errDeploymentCancelled
	}
	return errDeploymentFailed
}

// follow streams the deployment's events until one ends it, and returns its final
// state. A server without event streams is followed by polling.
func (w *watch) follow(ctx context.Context, c *apiclient.Client, id string) (string, error) {
	final := ""
	var writeErr error
	err := c.StreamEvents(ctx, "/sse/deployments/"+id, func(ev apiclient.Event) bool {
		if w.format == outputJSONL {
			if writeErr = json.NewEncoder(w.out).Encode(eventLine{ID: ev.ID, Type: string(ev.Type), Data: ev.Data}); writeErr != nil {
				return false
			}
		}
		if side, err := w.handleSide(ctx, c, id, ev); side {
			writeErr = err
			return err == nil
		}
		if status, ended := w.apply(ev); ended {
			final = status
			return false
		}
		if w.format == outputText {
			w.render()
		}
		return true
	})
	if writeErr != nil {
		return "", fmt.Errorf("writing an event: %w", writeErr)
	}
	if err == nil {
		return final, nil
	}
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		return "", err
	}
	return pollUntilDone(ctx, c, id)
}

// deploymentWithAnalyses reads the deployment once it ended. Failed targets are
// analysed right after they fail: it gives the analyser a moment so the summary can
// say why.
func deploymentWithAnalyses(ctx context.Context, c *apiclient.Client, id string) (api.Deployment, error) {
	d, _, err := c.Deployment(ctx, id)
	if err != nil {
		return d, err
	}
	for wait := 0; wait < analysisPolls && analysesPending(d); wait++ {
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(analysisPollWait):
		}
		if d, _, err = c.Deployment(ctx, id); err != nil {
			return d, err
		}
	}
	return d, nil
}

// analysesPending reports whether a failed target with a command still waits for its
// analysis.
func analysesPending(d api.Deployment) bool {
	for _, s := range d.Steps {
		for _, t := range s.Targets {
			if t.Status == domain.CommandFailed && t.ExitCode != nil && (t.Analysis == nil || t.Analysis.Status == domain.AnalysisQueued) {
				return true
			}
		}
	}
	return false
}

// terminal reports whether a deployment in status has ended.
func terminal(status string) bool {
	return status == domain.DeploymentSucceeded || status == domain.DeploymentFailed || status == domain.DeploymentCancelled
}

// pollUntilDone reads the deployment every second until it ends.
func pollUntilDone(ctx context.Context, c *apiclient.Client, id string) (string, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		d, _, err := c.Deployment(ctx, id)
		if err != nil {
			return "", err
		}
		if terminal(d.Status) {
			return d.Status, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}

// decode reads an event's data as its payload type; a field it lacks stays zero.
func decode[T any](ev apiclient.Event) T {
	var d T
	_ = json.Unmarshal(ev.Data, &d)
	return d
}
