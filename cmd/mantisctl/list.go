package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// deploymentsPath is the API's list of deployments.
const deploymentsPath = "/api/v1/deployments"

func newListCommand(f *clientFlags) *cobra.Command {
	var (
		statuses []string
		name     string
		limit    int
		all      bool
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
			out := cmd.OutOrStdout()
			if !all {
				ds, err := c.ListDeployments(cmd.Context(), statuses, name, limit)
				if err != nil {
					return err
				}
				return printDeployments(out, f.format, ds)
			}
			q := url.Values{}
			if len(statuses) > 0 {
				q.Set("status", strings.Join(statuses, ","))
			}
			if name != "" {
				q.Set("name", name)
			}
			q.Set("limit", strconv.Itoa(limit))
			var ds []api.Deployment
			err = followPages(cmd.Context(), c, deploymentsPath+"?"+q.Encode(),
				func(p api.DeploymentList) ([]api.Deployment, string) { return p.Deployments, p.Next },
				collectOrStream(f, out, &ds))
			if err != nil || f.format == outputJSONL {
				return err
			}
			return printDeployments(out, f.format, ds)
		},
	}
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only these states: pending,running,succeeded,failed,cancelled")
	cmd.Flags().StringVar(&name, "name", "", "only deployments of this name")
	cmd.Flags().IntVar(&limit, "limit", 50, "most deployments to show (1-500); with --all, the size of each page")
	cmd.Flags().BoolVar(&all, "all", false, "show every deployment, following the API's next-page links")
	return cmd
}

// printDeployments prints ds as a table, or as data in format.
func printDeployments(out io.Writer, format outputFormat, ds []api.Deployment) error {
	return printTable(out, format, ds, "ID\tNAME\tPRIORITY\tSTATUS\tCREATED", func(w io.Writer, d api.Deployment) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.Name, d.Priority, d.Status, d.CreatedAt.Local().Format(time.DateTime))
	})
}
