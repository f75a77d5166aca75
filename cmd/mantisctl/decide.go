package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// decisionUsage says what each decision command does.
var decisionUsage = map[string]string{
	api.DecisionApprove: "Approve the approval step a deployment waits at",
	api.DecisionReject:  "Reject the approval step a deployment waits at: the deployment fails",
	api.DecisionRetry:   "Run a failed step (on_failure: ask) again on the targets it failed on",
	api.DecisionSkip:    "Go on past a failed step (on_failure: ask) to the next step",
	api.DecisionAbort:   "Fail the deployment at a failed step (on_failure: ask)",
	api.DecisionPause:   "Pause a deployment: it stops between steps until resumed",
	api.DecisionResume:  "Resume a paused deployment",
}

// newDecisionCommands returns one command per decision: mantisctl approve ID
// [--comment TEXT], and so on.
func newDecisionCommands(f *clientFlags) []*cobra.Command {
	out := make([]*cobra.Command, 0, len(api.DecisionNames))
	for _, decision := range api.DecisionNames {
		if decision == api.DecisionResume {
			continue // mantisctl resume also resumes a deployment that ended (resume.go)
		}
		out = append(out, newDecisionCommand(f, decision))
	}
	return out
}

func newDecisionCommand(f *clientFlags, decision string) *cobra.Command {
	var comment string
	cmd := &cobra.Command{
		Use:               decision + " ID",
		Short:             decisionUsage[decision],
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDeploymentIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return sendDecision(cmd, f, c, args[0], decision, comment)
		},
	}
	cmd.Flags().StringVar(&comment, "comment", "", fmt.Sprintf("why (at most %d bytes); recorded with the decision", api.MaxDecisionComment))
	return cmd
}

// sendDecision sends decision to deployment id and prints the recorded decision.
func sendDecision(cmd *cobra.Command, f *clientFlags, c *apiclient.Client, id, decision, comment string) error {
	rec, err := c.Decide(cmd.Context(), id, decision, comment)
	if err != nil {
		return err
	}
	if f.format.structured() {
		return printData(cmd.OutOrStdout(), f.format, rec)
	}
	step := ""
	if rec.Step != nil {
		step = fmt.Sprintf(" at step %d", *rec.Step)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s%s by %s at %s\n", rec.Decision, id, step, rec.By, rec.At.Format("2006-01-02T15:04:05Z07:00"))
	return nil
}
