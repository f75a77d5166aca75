package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// webhookSecretEnv names the variable create reads the secret from when --secret is
// not given, so that it stays out of the shell's history.
const webhookSecretEnv = "MANTIS_WEBHOOK_SECRET"

// newWebhookCommand manages webhooks: create, list, delete and failures.
func newWebhookCommand(f *clientFlags) *cobra.Command {
	return commandGroup("webhook", "Register, list and delete webhooks, and list their failed deliveries", "",
		newWebhookCreateCommand(f),
		listCommand(f, "List the webhooks", apiclient.Webhooks.List, printWebhooks),
		deleteCommand(f, "delete ID", "Delete a webhook and its deliveries", "webhook", apiclient.Webhooks.Delete),
		argCommand[[]api.WebhookDelivery]{
			use:   "failures ID",
			short: "List a webhook's deliveries whose attempts are spent",
			call:  (*apiclient.Client).WebhookFailures,
			show: func(out io.Writer, format outputFormat, _ string, ds []api.WebhookDelivery) error {
				return printWebhookFailures(out, format, ds)
			},
		}.command(f))
}

func newWebhookCreateCommand(f *clientFlags) *cobra.Command {
	var body api.NewWebhook
	cmd := &cobra.Command{
		Use:     "create URL --events TYPE[,TYPE] [--secret S] [--allow-private-network]",
		Short:   "Register a webhook (the secret signs every delivery; default $" + webhookSecretEnv + ")",
		Example: `  MANTIS_WEBHOOK_SECRET=... mantisctl webhook create https://hooks.example/mantis --events deployment.*,step.failed`,
		Args:    cobra.ExactArgs(1),
		RunE: createRunE(f, func(args []string) (api.NewWebhook, error) {
			body.URL = args[0]
			if body.Secret == "" {
				body.Secret = os.Getenv(webhookSecretEnv)
			}
			return body, nil
		}, apiclient.Webhooks.Create, func(out io.Writer, created api.Webhook) {
			fmt.Fprintf(out, "webhook %s created\n", created.ID)
		}),
	}
	cmd.Flags().StringSliceVar(&body.EventTypes, "events", nil, "event types: deployment.* or step.* types, or deployment.* / step.*")
	cmd.Flags().StringVar(&body.Secret, "secret", "", "the signing secret, 16-256 bytes")
	cmd.Flags().BoolVar(&body.AllowPrivateNetwork, "allow-private-network", false,
		"let deliveries reach loopback, private and link-local addresses (refused otherwise, whatever the URL's name resolves to)")
	_ = cmd.MarkFlagRequired("events")
	return cmd
}

// printWebhooks prints hooks as a table, or as data in format.
func printWebhooks(out io.Writer, format outputFormat, hooks []api.Webhook) error {
	return printTable(out, format, hooks, "ID\tURL\tEVENTS\tCREATED BY", func(w io.Writer, h api.Webhook) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", h.ID, safetext.Terminal(h.URL), safetext.Terminal(strings.Join(h.EventTypes, ",")), safetext.Terminal(h.CreatedBy))
	})
}

// printWebhookFailures prints a webhook's failed deliveries ds as a table, or as
// data in format.
func printWebhookFailures(out io.Writer, format outputFormat, ds []api.WebhookDelivery) error {
	return printTable(out, format, ds, "EVENT\tTYPE\tATTEMPTS\tLAST ERROR", func(w io.Writer, d api.WebhookDelivery) {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", d.EventID, d.EventType, d.Attempts, safetext.Terminal(safetext.Bound(d.LastError, 120)))
	})
}
