package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// newTargetsCommand lists targets; its subcommands register and deregister them.
func newTargetsCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "List, register and deregister targets",
		Args:  cobra.NoArgs,
		RunE:  listRunE(f, apiclient.Targets.List, printTargets),
	}
	cmd.AddCommand(newTargetRegisterCommand(f), newTargetDeregisterCommand(f))
	return cmd
}

// printTargets prints ts as a table, or as data in format (no targets as null).
func printTargets(out io.Writer, format outputFormat, ts []api.Target) error {
	if format.structured() {
		return printData(out, format, ts)
	}
	return printTable(out, format, ts, "NAME\tMODE\tADDRESS\tTHORAX INSTANCE\tLABELS", func(w io.Writer, t api.Target) {
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
	})
}

func newTargetRegisterCommand(f *clientFlags) *cobra.Command {
	var spec api.NewTarget
	register := &cobra.Command{
		Use:   "register NAME",
		Short: "Register a target (or update the one of that name)",
		Args:  cobra.ExactArgs(1),
		RunE: createRunE(f, nameArg(&spec, &spec.Name), apiclient.Targets.Create, func(out io.Writer, t api.Target) {
			fmt.Fprintf(out, "registered %s (%s)\n", t.Name, t.Mode)
		}),
	}
	register.Flags().StringVar(&spec.Mode, "mode", "poll", "poll (the agent calls Thorax) or listen (Thorax calls the agent)")
	register.Flags().StringVar(&spec.Address, "address", "", "listen-mode agent address host:port")
	register.Flags().StringToStringVar(&spec.Labels, "label", nil, "labels key=value (repeatable)")
	return register
}

func newTargetDeregisterCommand(f *clientFlags) *cobra.Command {
	return argCommand[struct{}]{
		use:      "deregister NAME",
		short:    "Deregister a target",
		complete: completeFirstTargetName(f),
		call:     noAnswer(apiclient.Targets.Delete),
		show: func(out io.Writer, format outputFormat, name string, _ struct{}) error {
			return printAck(out, format, map[string]any{"name": name, "deregistered": true}, "deregistered "+name)
		},
	}.command(f)
}
