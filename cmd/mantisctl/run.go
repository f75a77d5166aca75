package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/spec"
)

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
			werr := watchDeployment(cmd.Context(), out, c, created.ID.String(), f.output == "json")
			if f.output != "json" {
				if view, _, err := c.Deployment(cmd.Context(), created.ID.String()); err == nil && len(view.Steps) > 0 {
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
