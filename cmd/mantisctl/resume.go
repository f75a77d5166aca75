package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// relatedFlags are the flags resume and rerun share.
type relatedFlags struct {
	watch bool
	wait  time.Duration
}

func (r *relatedFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&r.watch, "watch", "w", false, "follow the new deployment until it ends (exit codes as watch's)")
	cmd.Flags().DurationVar(&r.wait, "watch-timeout", 0, "with --watch: give up waiting after this long and exit 6 (0: no limit)")
}

// newResumeCommand is mantisctl resume: the resume decision for a paused deployment,
// or a new deployment resuming one that failed or was cancelled.
func newResumeCommand(f *clientFlags) *cobra.Command {
	var (
		rf         relatedFlags
		fromStep   int
		allTargets bool
		comment    string
	)
	cmd := &cobra.Command{
		Use:   "resume ID",
		Short: "Resume a paused deployment, or resume one that failed or was cancelled as a new deployment",
		Long: `resume does one of two things, after the deployment's status:

  running (paused)     it sends the resume decision: the deployment goes on with its
                       next step (what "mantisctl pause" stopped).
  failed or cancelled  it creates a NEW deployment (same name and spec) that runs the
                       steps from --from-step on (default: the first step that did not
                       succeed) on the targets that step failed on, or with
                       --all-targets on every target the deployment had. Targets no
                       longer registered are left out and named. It prints the new
                       deployment's id; --watch follows it as "mantisctl watch" does.

"mantisctl rerun ID" runs a deployment that ended again from its whole spec.`,
		Example: `  mantisctl resume 0193a5d0-...            # the failed step on its failed targets
  mantisctl resume 0193a5d0-... --from-step 2 --all-targets --watch`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDeploymentIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			d, _, err := c.Deployment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ended := d.Status == "failed" || d.Status == "cancelled" || d.Status == "succeeded"
			if !ended {
				if cmd.Flags().Changed("from-step") || allTargets {
					return invalidInput(fmt.Errorf("deployment %s is %s: --from-step and --all-targets resume a deployment that failed or was cancelled; without them resume sends the resume decision to a paused one", args[0], d.Status))
				}
				if err := sendDecision(cmd, f, c, args[0], api.DecisionResume, comment); err != nil || !rf.watch {
					return err
				}
				return watchDeployment(cmd.Context(), cmd.OutOrStdout(), c, args[0], watchOptions{format: f.format, timeout: rf.wait})
			}
			req := api.ResumeRequest{}
			if cmd.Flags().Changed("from-step") {
				req.FromStep = &fromStep
			}
			if allTargets {
				no := false
				req.FailedOnly = &no
			}
			resumed, err := c.ResumeDeployment(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return afterRelated(cmd, f, c, resumed, rf)
		},
	}
	rf.register(cmd)
	cmd.Flags().IntVar(&fromStep, "from-step", 0, "a deployment that ended: the 0-based position of the first step to run (default: the first that did not succeed)")
	cmd.Flags().BoolVar(&allTargets, "all-targets", false, "a deployment that ended: run on every target it had, not only the failed ones")
	cmd.Flags().StringVar(&comment, "comment", "", fmt.Sprintf("a paused deployment: why (at most %d bytes); recorded with the decision", api.MaxDecisionComment))
	return cmd
}

// newRerunCommand is mantisctl rerun: a new deployment from the spec of one that ended.
func newRerunCommand(f *clientFlags) *cobra.Command {
	var rf relatedFlags
	cmd := &cobra.Command{
		Use:   "rerun ID",
		Short: "Run a deployment that ended again, as a new deployment from the same spec",
		Long: `rerun creates a NEW deployment from the stored spec of a deployment that ended (any
status but pending and running): every step, its targets and its target_selector
resolved again. It prints the new deployment's id; --watch follows it.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDeploymentIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			rerun, err := c.RerunDeployment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return afterRelated(cmd, f, c, rerun, rf)
		},
	}
	rf.register(cmd)
	return cmd
}

// afterRelated prints a resumed or re-run deployment, or watches it.
func afterRelated(cmd *cobra.Command, f *clientFlags, c *apiclient.Client, d api.ResumedDeployment, rf relatedFlags) error {
	out := cmd.OutOrStdout()
	if rf.watch {
		fmt.Fprintf(out, "deployment %s %s\n", d.ID, relationText(d))
		return watchDeployment(cmd.Context(), out, c, d.ID.String(), watchOptions{format: f.format, timeout: rf.wait})
	}
	if f.format.structured() {
		return printData(out, f.format, d)
	}
	verb := "created"
	if !d.Created {
		verb = "exists (same idempotency key)"
	}
	fmt.Fprintf(out, "deployment %s %s: %s\n", d.ID, verb, relationText(d))
	if len(d.LeftOut) > 0 {
		fmt.Fprintf(out, "  left out (no longer registered): %s\n", strings.Join(d.LeftOut, ", "))
	}
	fmt.Fprintf(out, "  watch:    mantisctl watch %s\n", d.ID)
	if u := d.Links[api.LinkTemporal]; u != "" {
		fmt.Fprintf(out, "  temporal: %s\n", u)
	}
	return nil
}

// relationText says how d relates to the deployment it was made from.
func relationText(d api.ResumedDeployment) string {
	if d.FromStep != nil {
		return fmt.Sprintf("resumes %s from step %d on %d targets", d.ResumedFrom, *d.FromStep, len(d.Targets))
	}
	return fmt.Sprintf("runs %s again", d.ResumedFrom)
}
