package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/schema"
)

// Bounds of the wait for failed targets' analyses once a deployment ended.
const (
	analysisPolls    = 20
	analysisPollWait = 150 * time.Millisecond
)

// maxWatchedSteps bounds the steps an event may create: a step position past it is
// not a step of a real spec.
const maxWatchedSteps = 1000

// progressBarWidth is how many characters a step's bar takes.
const progressBarWidth = 30

func newWatchCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a deployment live: one line per step with its progress; exits 0 only on success",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return watchDeployment(cmd.Context(), cmd.OutOrStdout(), c, args[0], f.output == "json")
		},
	}
}

// errDeploymentNotSucceeded makes watch exit non-zero without printing more.
var errDeploymentNotSucceeded = errors.New("deployment did not succeed")

// watchDeployment follows a deployment's events until it ends, drawing one line per
// step, then prints its summary; it fails with errDeploymentNotSucceeded unless the
// deployment succeeded.
func watchDeployment(ctx context.Context, out io.Writer, c *apiclient.Client, id string, asJSON bool) error {
	d, links, err := c.Deployment(ctx, id)
	if err != nil {
		return err
	}
	w := newWatch(out, d, asJSON)
	if !asJSON {
		fmt.Fprintf(out, "deployment %s (%s)\n", d.Name, d.ID)
		if u := links[api.LinkTemporal]; u != "" {
			fmt.Fprintf(out, "temporal: %s\n", u)
		}
	}
	final := ""
	if terminal(d.Status) {
		final = d.Status
	} else if final, err = w.follow(ctx, c, id); err != nil {
		return err
	}
	if d, err = deploymentWithAnalyses(ctx, c, id); err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(out, d); err != nil {
			return err
		}
	} else {
		printDeploymentSummary(out, d)
	}
	if final != schema.DeploymentSucceeded && d.Status != schema.DeploymentSucceeded {
		return errDeploymentNotSucceeded
	}
	return nil
}

// follow streams the deployment's events until one ends it, and returns its final
// state. A server without event streams is followed by polling.
func (w *watch) follow(ctx context.Context, c *apiclient.Client, id string) (string, error) {
	final := ""
	err := c.StreamEvents(ctx, "/sse/deployments/"+id, func(ev apiclient.Event) bool {
		if w.asJSON {
			fmt.Fprintf(w.out, `{"id":%q,"type":%q,"data":%s}`+"\n", ev.ID, ev.Type, ev.Data)
		}
		if status, ended := w.apply(ev); ended {
			final = status
			return false
		}
		if !w.asJSON {
			w.render()
		}
		return true
	})
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

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// analysesPending reports whether a failed target with a command still waits for its
// analysis.
func analysesPending(d api.Deployment) bool {
	for _, s := range d.Steps {
		for _, t := range s.Targets {
			if t.Status == schema.CommandFailed && t.ExitCode != nil && (t.Analysis == nil || t.Analysis.Status == schema.AnalysisQueued) {
				return true
			}
		}
	}
	return false
}

// terminal reports whether a deployment in status has ended.
func terminal(status string) bool {
	return status == schema.DeploymentSucceeded || status == schema.DeploymentFailed || status == schema.DeploymentCancelled
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
