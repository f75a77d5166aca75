package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

func newDLQCommand(f *clientFlags) *cobra.Command {
	dlq := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, requeue and purge the broker's dead-letter queue (mantis.dlq) through Mandible",
		Long: `Nudges Thorax could not process end in mantis.dlq, which nothing consumes: malformed
messages, nudges naming no command, and nudges that failed after their one broker retry
(the commands themselves stay queued in Mandible, where Thorax's polling claims them).
These commands read, requeue and purge it through Mandible's API; mantisctl never talks
to the broker.`,
		Args: cobra.NoArgs,
	}
	dlq.AddCommand(newDLQListCommand(f), newDLQRequeueCommand(f), newDLQPurgeCommand(f))
	return dlq
}

func listDLQ(cmd *cobra.Command, f *clientFlags, limit int) (broker.DLQListing, error) {
	var out broker.DLQListing
	c, err := f.client()
	if err != nil {
		return out, err
	}
	err = c.Do(cmd.Context(), http.MethodGet, "/api/v1/dlq?"+url.Values{"limit": {strconv.Itoa(limit)}}.Encode(), nil, &out)
	return out, err
}

func newDLQListCommand(f *clientFlags) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the messages at the head of the DLQ with why they were dead-lettered (x-death)",
		Example: `  mantisctl dlq list
  mantisctl dlq list --limit 100 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			listing, err := listDLQ(cmd, f, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.format.structured() {
				return printData(out, f.format, listing)
			}
			fmt.Fprintf(out, "%s holds %d message(s); showing %d.\n", listing.Queue, listing.Depth, len(listing.Messages))
			if len(listing.Messages) == 0 {
				return nil
			}
			fmt.Fprintln(out)
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "#\tCOMMAND\tTARGET\tMODE\tPRIORITY\tMAX RETRIES\tROUTING KEY\tDEAD-LETTERED")
			for i, m := range listing.Messages {
				command, target, mode, priority, retries := "-", "-", "-", "-", "-"
				if n := m.Nudge; n != nil {
					command, target, mode, priority, retries = n.CommandID, n.Target, n.Mode, n.Priority, strconv.Itoa(n.MaxRetries)
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, command, target, mode, priority, retries, m.RoutingKey, deathSummary(m.Deaths))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for i, m := range listing.Messages {
				if m.Nudge == nil {
					fmt.Fprintf(out, "\n#%d is not a nudge: %s\n  body (%s): %s\n", i+1, m.Problem, m.BodyEncoding, clip(m.Body, 200))
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "most messages to show (0-1000); listing leaves them in the DLQ")
	return cmd
}

// deathSummary renders x-death as "rejected from mantis.commands.priority.high
// x2 (last 2026-01-02 15:04:05)", one entry per queue and reason.
func deathSummary(deaths []broker.Death) string {
	if len(deaths) == 0 {
		return "- (no x-death header)"
	}
	parts := make([]string, len(deaths))
	for i, d := range deaths {
		parts[i] = fmt.Sprintf("%s from %s x%d", d.Reason, d.Queue, d.Count)
		if !d.Time.IsZero() {
			parts[i] += " (last " + d.Time.Local().Format(time.DateTime) + ")"
		}
	}
	return strings.Join(parts, "; ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func newDLQRequeueCommand(f *clientFlags) *cobra.Command {
	var body api.DLQRequeueBody
	cmd := &cobra.Command{
		Use:   "requeue --to high|normal|low",
		Short: "Move messages from the DLQ back to a command queue, oldest first",
		Long: `Requeue moves messages from the head of mantis.dlq to the command queue of the given
priority (routing key command.<mode>.<priority>), keeping their headers: a nudge whose
x-death count reaches its max_retries goes straight back to the DLQ unprocessed.`,
		Example: `  mantisctl dlq requeue --to high
  mantisctl dlq requeue --to normal --limit 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if body.To != "high" && body.To != "normal" && body.To != "low" {
				return invalidInput(fmt.Errorf("--to: must be high, normal or low, got %q", body.To))
			}
			if body.Limit < 0 {
				return invalidInput(fmt.Errorf("--limit: must not be negative, got %d", body.Limit))
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			var res api.DLQRequeueResult
			if err := c.Do(cmd.Context(), http.MethodPost, "/api/v1/dlq/requeue", body, &res); err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "requeued %d message(s) from %s to %s\n", res.Requeued, broker.DeadLetterQ, res.Queue)
			return nil
		},
	}
	cmd.Flags().StringVar(&body.To, "to", "", "priority queue to move them to: high, normal or low (required)")
	cmd.Flags().IntVar(&body.Limit, "limit", 0, "most messages to move (0: every message the DLQ holds now)")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// errNotConfirmed is a purge the operator did not confirm.
var errNotConfirmed = errors.New("purge not confirmed: nothing was purged")

func newDLQPurgeCommand(f *clientFlags) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Drop every message in the DLQ for good (asks for confirmation unless --yes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				listing, err := listDLQ(cmd, f, 0)
				if err != nil {
					return err
				}
				if listing.Depth == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "%s is empty: nothing to purge\n", listing.Queue)
					return nil
				}
				if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(),
					fmt.Sprintf("Drop all %d message(s) in %s for good? Type yes to purge: ", listing.Depth, listing.Queue)); err != nil {
					return err
				}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			var res api.DLQPurgeResult
			if err := c.Do(cmd.Context(), http.MethodPost, "/api/v1/dlq/purge", api.DLQPurgeBody{Confirm: true}, &res); err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d message(s) from %s\n", res.Purged, broker.DeadLetterQ)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "purge without asking")
	return cmd
}

// confirm asks question on out and reads the answer from in: only "yes"
// confirms; end of input (no terminal to ask on) does not.
func confirm(in io.Reader, out io.Writer, question string) error {
	fmt.Fprint(out, question)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the confirmation: %w", err)
	}
	if strings.TrimSpace(answer) == "yes" {
		return nil
	}
	if errors.Is(err, io.EOF) && strings.TrimSpace(answer) == "" {
		fmt.Fprintln(out)
		return fmt.Errorf("%w (no answer; pass --yes to purge without asking)", errNotConfirmed)
	}
	return errNotConfirmed
}
