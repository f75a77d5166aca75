package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// newTargetsCommand lists targets; its subcommands register and deregister them.
func newTargetsCommand(f *clientFlags) *cobra.Command {
	var q apiclient.TargetQuery
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "List, register and deregister targets",
		Long: "Without a subcommand, list the registered targets by name: every one, read from the API a page\n" +
			"at a time, or the first --limit of them; --selector keeps those whose labels hold every key=value.",
		Example: `  mantisctl targets
  mantisctl targets --selector role=web,env=prod
  mantisctl targets --limit 20 -o json`,
		Args: cobra.NoArgs,
		RunE: listRunE(f, func(c *apiclient.Client, ctx context.Context) ([]api.Target, error) {
			if q.Limit < 0 {
				return nil, invalidInput(fmt.Errorf("--limit: must be 0 (every target) or more, got %d", q.Limit))
			}
			return c.ListTargets(ctx, q)
		}, printTargets),
	}
	cmd.Flags().StringToStringVar(&q.Selector, "selector", nil, "only targets whose labels hold every key=value (role=web,env=prod)")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "most targets to show, the first by name; 0 shows every target")
	cmd.AddCommand(newTargetRegisterCommand(f), newTargetDeregisterCommand(f), newTargetGetCommand(f))
	return cmd
}

func newTargetGetCommand(f *clientFlags) *cobra.Command {
	return argCommand[api.Target]{
		use:      "get NAME",
		short:    "Show one registered target",
		complete: completeFirstTargetName(f),
		call:     apiclient.Targets.Get,
		show: func(out io.Writer, format outputFormat, _ string, t api.Target) error {
			if format.structured() {
				return printData(out, format, t)
			}
			return printTargets(out, format, []api.Target{t})
		},
	}.command(f)
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
