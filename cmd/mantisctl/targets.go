package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
)

// newTargetsCommand lists targets; its subcommands register and deregister them.
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
			return printTargets(cmd.OutOrStdout(), ts, f.format)
		},
	}
	cmd.AddCommand(newTargetRegisterCommand(f), newTargetDeregisterCommand(f))
	return cmd
}

// printTargets prints ts as a table, or as data in format.
func printTargets(out io.Writer, ts []api.Target, format outputFormat) error {
	if format.structured() {
		return printData(out, format, ts)
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
}

func newTargetRegisterCommand(f *clientFlags) *cobra.Command {
	var spec api.NewTarget
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
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registered %s (%s)\n", t.Name, t.Mode)
			return nil
		},
	}
	register.Flags().StringVar(&spec.Mode, "mode", "poll", "poll (the agent calls Thorax) or listen (Thorax calls the agent)")
	register.Flags().StringVar(&spec.Address, "address", "", "listen-mode agent address host:port")
	register.Flags().StringToStringVar(&spec.Labels, "label", nil, "labels key=value (repeatable)")
	return register
}

func newTargetDeregisterCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "deregister NAME",
		Short:             "Deregister a target",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeFirstTargetName(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeregisterTarget(cmd.Context(), args[0]); err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, map[string]any{"name": args[0], "deregistered": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deregistered %s\n", args[0])
			return nil
		},
	}
}
