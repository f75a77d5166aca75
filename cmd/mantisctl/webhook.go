package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// webhookSecretEnv names the variable create reads the secret from when --secret is
// not given, so that it stays out of the shell's history.
const webhookSecretEnv = "MANTIS_WEBHOOK_SECRET"

func newWebhookCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Register, list and delete webhooks, and list their failed deliveries",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newWebhookCreateCommand(f), newWebhookListCommand(f), newWebhookDeleteCommand(f), newWebhookFailuresCommand(f))
	return cmd
}

func newWebhookCreateCommand(f *clientFlags) *cobra.Command {
	var body api.NewWebhook
	cmd := &cobra.Command{
		Use:     "create URL --events TYPE[,TYPE] [--secret S]",
		Short:   "Register a webhook (the secret signs every delivery; default $" + webhookSecretEnv + ")",
		Example: `  MANTIS_WEBHOOK_SECRET=... mantisctl webhook create https://hooks.example/mantis --events deployment.*,step.failed`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body.URL = args[0]
			if body.Secret == "" {
				body.Secret = os.Getenv(webhookSecretEnv)
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			created, err := c.CreateWebhook(cmd.Context(), body)
			if err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, created)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "webhook %s created\n", created.ID)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&body.EventTypes, "events", nil, "event types: deployment.* or step.* types, or deployment.* / step.*")
	cmd.Flags().StringVar(&body.Secret, "secret", "", "the signing secret, 16-256 bytes")
	_ = cmd.MarkFlagRequired("events")
	return cmd
}

func newWebhookListCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the webhooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			hooks, err := c.ListWebhooks(cmd.Context())
			if err != nil {
				return err
			}
			return printWebhooks(cmd.OutOrStdout(), f.format, hooks)
		},
	}
}

// printWebhooks prints hooks as a table, or as data in format.
func printWebhooks(out io.Writer, format outputFormat, hooks []api.Webhook) error {
	if done, err := printListData(out, format, hooks); done {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tURL\tEVENTS\tCREATED BY")
	for _, h := range hooks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", h.ID, safetext.Terminal(h.URL), safetext.Terminal(strings.Join(h.EventTypes, ",")), safetext.Terminal(h.CreatedBy))
	}
	return w.Flush()
}

func newWebhookDeleteCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a webhook and its deliveries",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.DeleteWebhook(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted webhook %s\n", args[0])
			return nil
		},
	}
}

func newWebhookFailuresCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "failures ID",
		Short: "List a webhook's deliveries whose attempts are spent",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ds, err := c.WebhookFailures(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if done, err := printListData(out, f.format, ds); done {
				return err
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "EVENT\tTYPE\tATTEMPTS\tLAST ERROR")
			for _, d := range ds {
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", d.EventID, d.EventType, d.Attempts, safetext.Terminal(safetext.Bound(d.LastError, 120)))
			}
			return w.Flush()
		},
	}
}
