package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/spec"
	"github.com/mantis-deploy/mantis/schema"
)

func newDeployCommand(f *clientFlags) *cobra.Command {
	var (
		file  string
		watch bool
	)
	cmd := &cobra.Command{
		Use:   "deploy -f SPEC",
		Short: "Submit a deployment spec (YAML or JSON; - reads stdin)",
		Example: `  mantisctl deploy -f release.yaml --watch
  cat release.json | mantisctl deploy -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var body []byte
			if file == "-" {
				body, err = io.ReadAll(cmd.InOrStdin())
			} else {
				body, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("reading spec: %w", err)
			}
			// Check locally first: every problem at once, without a round trip.
			if _, err := spec.Parse(body); err != nil {
				return err
			}
			created, err := c.CreateDeployment(cmd.Context(), body)
			if err != nil {
				return err
			}
			return afterCreate(cmd, f, c, created, watch)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the spec file (YAML or JSON); - for stdin")
	_ = cmd.MarkFlagRequired("file")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the deployment until it ends")
	return cmd
}

func afterCreate(cmd *cobra.Command, f *clientFlags, c *apiclient.Client, created apiclient.CreatedDeployment, watch bool) error {
	out := cmd.OutOrStdout()
	if !watch {
		if f.output == "json" {
			return printJSON(out, created)
		}
		verb := "created"
		if !created.Created {
			verb = "exists (same idempotency key)"
		}
		fmt.Fprintf(out, "deployment %s %s\n  watch:    mantisctl watch %s\n", created.ID, verb, created.ID)
		if u := created.Links["temporal"]; u != "" {
			fmt.Fprintf(out, "  temporal: %s\n", u)
		}
		return nil
	}
	return watchDeployment(cmd.Context(), out, c, created.ID, f.output == "json")
}

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

// stepProgress counts a step's targets while watching.
type stepProgress struct {
	name                                      string
	status                                    string
	total, queued, running, succeeded, failed int
}

func (p stepProgress) line(width int) string {
	done := p.succeeded + p.failed
	bar := ""
	if p.total > 0 {
		ok := p.succeeded * width / p.total
		bad := p.failed * width / p.total
		run := p.running * width / p.total
		bar = strings.Repeat("#", ok) + strings.Repeat("x", bad) + strings.Repeat(">", run)
		bar += strings.Repeat(".", max(width-len(bar), 0))
	}
	return fmt.Sprintf("%-20s [%s] %d/%d done  %d failed  %d running  %s", p.name, bar, done, p.total, p.failed, p.running, p.status)
}

// errDeploymentNotSucceeded makes watch exit non-zero without printing more.
var errDeploymentNotSucceeded = errors.New("deployment did not succeed")

func watchDeployment(ctx context.Context, out io.Writer, c *apiclient.Client, id string, asJSON bool) error {
	d, links, err := c.Deployment(ctx, id)
	if err != nil {
		return err
	}
	steps := make([]*stepProgress, len(d.Steps))
	for i, s := range d.Steps {
		steps[i] = &stepProgress{name: s.Name, status: s.Status, total: len(s.Targets)}
	}
	if !asJSON {
		fmt.Fprintf(out, "deployment %s (%s)\n", d.Name, d.ID)
		if u := links["temporal"]; u != "" {
			fmt.Fprintf(out, "temporal: %s\n", u)
		}
	}
	// On a terminal the step lines are redrawn in place, one line per step; elsewhere
	// (a pipe, a log) a step's line is printed again whenever it changes.
	tty := isTerminal(out)
	lastLines := map[int]string{}
	drawn := 0
	render := func() {
		if tty {
			if drawn > 0 {
				fmt.Fprintf(out, "\x1b[%dA", drawn)
			}
			for _, p := range steps {
				fmt.Fprintf(out, "\x1b[2K%s\n", p.line(30))
			}
			drawn = len(steps)
			return
		}
		for i, p := range steps {
			if l := p.line(30); l != lastLines[i] {
				lastLines[i] = l
				fmt.Fprintln(out, l)
			}
		}
	}
	final := ""
	if terminal(d.Status) {
		final = d.Status
	} else {
		err = c.StreamEvents(ctx, "/sse/deployments/"+id, func(ev apiclient.Event) bool {
			if asJSON {
				fmt.Fprintf(out, `{"id":%q,"type":%q,"data":%s}`+"\n", ev.ID, ev.Type, ev.Data)
			}
			var data struct {
				StepPosition *int   `json:"step_position"`
				Step         string `json:"step"`
				Targets      any    `json:"targets"`
			}
			_ = json.Unmarshal(ev.Data, &data)
			var p *stepProgress
			// A deployment just created has no steps recorded yet: they appear with
			// their first events.
			if pos := data.StepPosition; pos != nil && *pos >= 0 && *pos < 1000 {
				for len(steps) <= *pos {
					steps = append(steps, &stepProgress{name: fmt.Sprintf("step %d", len(steps)), status: "pending"})
				}
				p = steps[*pos]
				if data.Step != "" {
					p.name = data.Step
				}
			}
			switch {
			case ev.Type == "step.started" && p != nil:
				p.status = "running"
				if n, ok := data.Targets.(float64); ok {
					p.total = int(n)
				}
			case strings.HasPrefix(ev.Type, "step.") && p != nil:
				p.status = strings.TrimPrefix(ev.Type, "step.")
			case ev.Type == "target.queued" && p != nil:
				p.queued++
			case ev.Type == "target.running" && p != nil:
				p.running++
				p.queued = max(p.queued-1, 0)
			case ev.Type == "target.succeeded" && p != nil:
				p.succeeded++
				p.running = max(p.running-1, 0)
			case ev.Type == "target.failed" && p != nil:
				p.failed++
				p.running = max(p.running-1, 0)
			case strings.HasPrefix(ev.Type, "deployment.") && terminal(strings.TrimPrefix(ev.Type, "deployment.")):
				final = strings.TrimPrefix(ev.Type, "deployment.")
				return false
			}
			if !asJSON {
				render()
			}
			return true
		})
		if err != nil {
			var apiErr *apiclient.Error
			if !errors.As(err, &apiErr) || apiErr.Status != 404 {
				return err
			}
			// A server without event streams: follow by polling.
			final, err = pollUntilDone(ctx, c, id)
			if err != nil {
				return err
			}
		}
	}
	d, _, err = c.Deployment(ctx, id)
	if err != nil {
		return err
	}
	// Failed targets are analysed right after they fail: give the analyser a moment so
	// the summary can say why.
	for wait := 0; wait < 20 && analysesPending(d); wait++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
		if d, _, err = c.Deployment(ctx, id); err != nil {
			return err
		}
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
func analysesPending(d schema.DeploymentView) bool {
	for _, s := range d.Steps {
		for _, t := range s.Targets {
			if t.Status == "failed" && t.ExitCode != nil && (t.Analysis == nil || t.Analysis.Status == "queued") {
				return true
			}
		}
	}
	return false
}

func terminal(status string) bool {
	return status == schema.DeploymentSucceeded || status == schema.DeploymentFailed || status == schema.DeploymentCancelled
}

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

// printDeploymentSummary prints the final state: each step with its counts, and each failed
// target with its exit code, output tail and analysis. Text that a command or an agent
// wrote is printed through safetext.Terminal.
func printDeploymentSummary(out io.Writer, d schema.DeploymentView) {
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

func newRunCommand(f *clientFlags) *cobra.Command {
	var (
		targets  []string
		selector map[string]string
		priority string
		timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run --targets a,b -- COMMAND...",
		Short: "Run one command on targets as an ad-hoc one-step deployment, watched, with each target's output",
		Example: `  mantisctl run --targets web-1,web-2 -- uptime
  mantisctl run --selector role=web -- systemctl status nginx`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			command := strings.Join(args, " ")
			d := spec.Deployment{
				Name: "run-" + time.Now().UTC().Format("20060102-150405"), Priority: priority,
				Targets: targets, TargetSelector: selector,
				Steps: []spec.Step{{Name: "run", Command: command, Timeout: timeout.String()}},
			}
			if err := d.Validate(); err != nil {
				return err
			}
			body, err := json.Marshal(d)
			if err != nil {
				return err
			}
			created, err := c.CreateDeployment(cmd.Context(), body)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			werr := watchDeployment(cmd.Context(), out, c, created.ID, f.output == "json")
			if f.output != "json" {
				if view, _, err := c.Deployment(cmd.Context(), created.ID); err == nil && len(view.Steps) > 0 {
					ts := view.Steps[0].Targets
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
			}
			return werr
		},
	}
	cmd.Flags().StringSliceVar(&targets, "targets", nil, "target names, comma-separated")
	cmd.Flags().StringToStringVar(&selector, "selector", nil, "pick targets by labels key=value")
	cmd.Flags().StringVar(&priority, "priority", "normal", "high, normal or low")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "command timeout")
	return cmd
}

func newGetCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show a deployment: steps and per-target results with exit code, output tail and analysis",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			d, _, err := c.Deployment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), d)
			}
			printDeploymentSummary(cmd.OutOrStdout(), d)
			return nil
		},
	}
}

func newListCommand(f *clientFlags) *cobra.Command {
	var (
		statuses []string
		name     string
		limit    int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List deployments, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ds, err := c.ListDeployments(cmd.Context(), statuses, name, limit)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), ds)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tPRIORITY\tSTATUS\tCREATED")
			for _, d := range ds {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.Name, d.Priority, d.Status, d.CreatedAt.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only these states: pending,running,succeeded,failed,cancelled")
	cmd.Flags().StringVar(&name, "name", "", "only deployments of this name")
	cmd.Flags().IntVar(&limit, "limit", 50, "most deployments to show (1-500)")
	return cmd
}

func newCancelCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a deployment: what has not started is stopped, running commands are killed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.CancelDeployment(cmd.Context(), args[0]); err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), map[string]string{"id": args[0], "status": "cancelling"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancelling %s\n", args[0])
			return nil
		},
	}
}
