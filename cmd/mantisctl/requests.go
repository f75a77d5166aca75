package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

func newRequestsCommand(f *clientFlags) *cobra.Command {
	var q apiclient.DispatchRequestQuery
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "List dispatch requests with their state and why they are not yet dispatched",
		Example: `  mantisctl requests --status pending
  mantisctl requests --target web-1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			reqs, err := c.ListDispatchRequests(cmd.Context(), q)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				return printJSON(out, reqs)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTARGET\tPRIORITY\tSTATUS\tATTEMPTS\tNEXT ATTEMPT\tEXPIRES\tREASON")
			for _, r := range reqs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.ID, r.Target, r.Priority, r.Status,
					r.Attempts, r.MaxAttempts, r.NextAttemptAt.Local().Format(time.DateTime), r.ExpiresAt.Local().Format(time.DateTime), safetext.Terminal(r.Reason))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&q.Statuses, "status", nil, "only these states: "+strings.Join([]string{"pending", "processing", "dispatched", "failed", "expired"}, ","))
	cmd.Flags().StringVar(&q.Target, "target", "", "only requests for this target")
	cmd.Flags().StringVar(&q.Deployment, "deployment", "", "only requests of this deployment id")
	cmd.Flags().IntVar(&q.Limit, "limit", 100, "most requests to show (1-1000)")
	return cmd
}
