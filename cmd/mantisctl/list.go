package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

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
