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

func newTargetsCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "List, register and deregister targets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ts, err := c.ListTargets(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.output == "json" {
				return printJSON(out, ts)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tMODE\tADDRESS\tTHORAX INSTANCE\tLABELS")
			for _, t := range ts {
				addr, inst := "-", "-"
				if t.Address != nil {
					addr = *t.Address
				}
				if t.AssignedInstanceID != nil {
					inst = t.AssignedInstanceID.String()
				}
				var labels []string
				for k, v := range t.Labels {
					labels = append(labels, k+"="+v)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Mode, addr, inst, strings.Join(labels, ","))
			}
			return w.Flush()
		},
	}
	var spec apiclient.TargetSpec
	register := &cobra.Command{
		Use:   "register NAME",
		Short: "Register a target (or update the one of that name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			spec.Name = args[0]
			t, err := c.RegisterTarget(cmd.Context(), spec)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registered %s (%s)\n", t.Name, t.Mode)
			return nil
		},
	}
	register.Flags().StringVar(&spec.Mode, "mode", "poll", "poll (the agent calls Thorax) or listen (Thorax calls the agent)")
	register.Flags().StringVar(&spec.Address, "address", "", "listen-mode agent address host:port")
	register.Flags().StringToStringVar(&spec.Labels, "label", nil, "labels key=value (repeatable)")
	deregister := &cobra.Command{
		Use:   "deregister NAME",
		Short: "Deregister a target",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeregisterTarget(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deregistered %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(register, deregister)
	return cmd
}
