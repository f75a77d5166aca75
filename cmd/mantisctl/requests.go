package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// dispatchRequestsPath is the API's list of dispatch requests.
const dispatchRequestsPath = "/api/v1/dispatch-requests"

func newRequestsCommand(f *clientFlags) *cobra.Command {
	var (
		q   apiclient.DispatchRequestQuery
		all bool
	)
	cmd := &cobra.Command{
		Use:   "requests",
		Short: "List dispatch requests with their state and why they are not yet dispatched",
		Example: `  mantisctl requests --status pending
  mantisctl requests --target web-1 -o json
  mantisctl requests --all -o jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !all {
				reqs, err := c.ListDispatchRequests(cmd.Context(), q)
				if err != nil {
					return err
				}
				return printDispatchRequests(out, f.format, reqs)
			}
			var reqs []api.DispatchRequest
			err = followPages(cmd.Context(), c, dispatchRequestsPath+"?"+requestsQuery(q).Encode(),
				func(p api.DispatchRequestList) ([]api.DispatchRequest, string) { return p.Requests, p.Next },
				collectOrStream(f, out, &reqs))
			if err != nil || f.format == outputJSONL {
				return err
			}
			return printDispatchRequests(out, f.format, reqs)
		},
	}
	cmd.Flags().StringSliceVar(&q.Statuses, "status", nil, "only these states: "+strings.Join([]string{"pending", "processing", "dispatched", "failed", "expired"}, ","))
	cmd.Flags().StringVar(&q.Target, "target", "", "only requests for this target")
	cmd.Flags().StringVar(&q.Deployment, "deployment", "", "only requests of this deployment id")
	cmd.Flags().IntVar(&q.Limit, "limit", 100, "most requests to show (1-1000); with --all, the size of each page")
	cmd.Flags().BoolVar(&all, "all", false, "show every request, following the API's next-page links")
	_ = cmd.RegisterFlagCompletionFunc("target", completeTargetNames(f))
	_ = cmd.RegisterFlagCompletionFunc("deployment", completeDeploymentIDs(f))
	return cmd
}

// requestsQuery is the query string of q.
func requestsQuery(q apiclient.DispatchRequestQuery) url.Values {
	v := url.Values{}
	if len(q.Statuses) > 0 {
		v.Set("status", strings.Join(q.Statuses, ","))
	}
	if q.Target != "" {
		v.Set("target", q.Target)
	}
	if q.Deployment != "" {
		v.Set("deployment", q.Deployment)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// printDispatchRequests prints reqs as a table, or as data in format.
func printDispatchRequests(out io.Writer, format outputFormat, reqs []api.DispatchRequest) error {
	return printTable(out, format, reqs, "ID\tTARGET\tPRIORITY\tSTATUS\tATTEMPTS\tNEXT ATTEMPT\tEXPIRES\tHELD BY\tREASON", func(w io.Writer, r api.DispatchRequest) {
		heldBy := "-"
		if r.HeldBy != "" {
			heldBy = safetext.Terminal(r.HeldBy)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", r.ID, r.Target, r.Priority, r.Status,
			r.Attempts, r.MaxAttempts, r.NextAttemptAt.Local().Format(time.DateTime), r.ExpiresAt.Local().Format(time.DateTime), heldBy, safetext.Terminal(r.Reason))
	})
}
