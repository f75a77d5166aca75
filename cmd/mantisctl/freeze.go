package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// newFleetCommands are the commands of freeze windows, schedules and webhooks.
func newFleetCommands(f *clientFlags) []*cobra.Command {
	return []*cobra.Command{newFreezeCommand(f), newScheduleCommand(f), newWebhookCommand(f)}
}

// newFreezeCommand manages freeze windows: list, create and delete.
func newFreezeCommand(f *clientFlags) *cobra.Command {
	return commandGroup("freeze", "List, create and delete freeze windows",
		"While a freeze window is active, deployments on the targets its selector matches are refused\n"+
			"(409, naming the freeze and its reason) unless an admin overrides it (deploy --override-freeze).",
		listCommand(f, "List the freeze windows and whether each holds now", apiclient.Freezes.List, printFreezes),
		newFreezeCreateCommand(f),
		deleteCommand(f, "delete NAME", "Delete a freeze window", "freeze", apiclient.Freezes.Delete))
}

// printFreezes prints fs as a table, or as data in format.
func printFreezes(out io.Writer, format outputFormat, fs []api.Freeze) error {
	return printTable(out, format, fs, "NAME\tACTIVE\tSELECTOR\tWINDOW\tREASON", func(w io.Writer, fz api.Freeze) {
		fmt.Fprintf(w, "%s\t%t\t%s\t%s\t%s\n", fz.Name, fz.Active, safetext.Terminal(selectorText(fz.Selector)),
			safetext.Terminal(windowText(fz)), safetext.Terminal(fz.Reason))
	})
}

// selectorText is a selector as k=v,k=v, or "(all targets)".
func selectorText(sel map[string]string) string {
	if len(sel) == 0 {
		return "(all targets)"
	}
	parts := make([]string, 0, len(sel))
	for k, v := range sel {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// windowText says when a freeze holds.
func windowText(fz api.Freeze) string {
	var parts []string
	if fz.StartsAt != nil {
		parts = append(parts, "from "+fz.StartsAt.UTC().Format(time.RFC3339))
	}
	if fz.EndsAt != nil {
		parts = append(parts, "until "+fz.EndsAt.UTC().Format(time.RFC3339))
	}
	if wk := fz.Weekly; wk != nil {
		tz := wk.Timezone
		if tz == "" {
			tz = "UTC"
		}
		parts = append(parts, fmt.Sprintf("%s %s-%s %s", strings.Join(wk.Days, ","), wk.From, wk.To, tz))
	}
	if len(parts) == 0 {
		return "always"
	}
	return strings.Join(parts, " ")
}

func newFreezeCreateCommand(f *clientFlags) *cobra.Command {
	var (
		body           api.NewFreeze
		selector, days []string
		start, end     string
		weekly         api.WeeklyWindow
	)
	cmd := &cobra.Command{
		Use:   "create NAME --reason TEXT [--selector k=v]... [--start T] [--end T] [--days sat,sun --from HH:MM --to HH:MM [--timezone TZ]]",
		Short: "Create a freeze window",
		Example: `  mantisctl freeze create weekend --reason "no weekend deploys" --selector env=prod \
      --days sat,sun --from 00:00 --to 00:00 --timezone Europe/Paris
  mantisctl freeze create holidays --reason "year end" --start 2026-12-24T00:00:00Z --end 2027-01-02T00:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: createRunE(f, func(args []string) (api.NewFreeze, error) {
			body.Name = args[0]
			if err := freezeBody(&body, selector, start, end, days, weekly); err != nil {
				return body, invalidInput(err)
			}
			return body, nil
		}, apiclient.Freezes.Create, func(out io.Writer, created api.Freeze) {
			fmt.Fprintf(out, "freeze %s created (active now: %t)\n", created.Name, created.Active)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&body.Reason, "reason", "", "why deployments are frozen (shown in every refusal)")
	fl.StringSliceVar(&selector, "selector", nil, "label=value a target must carry (repeat; none: every target)")
	fl.StringVar(&start, "start", "", "RFC 3339 time the freeze starts (default: now)")
	fl.StringVar(&end, "end", "", "RFC 3339 time the freeze ends (default: never)")
	fl.StringSliceVar(&days, "days", nil, "weekly window: days (mon,tue,wed,thu,fri,sat,sun)")
	fl.StringVar(&weekly.From, "from", "", "weekly window: opens at HH:MM")
	fl.StringVar(&weekly.To, "to", "", "weekly window: closes at HH:MM (at or before --from: the next day)")
	fl.StringVar(&weekly.Timezone, "timezone", "", "weekly window: IANA time zone (default UTC)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

// freezeBody fills body from the command line's flags.
func freezeBody(body *api.NewFreeze, selector []string, start, end string, days []string, weekly api.WeeklyWindow) error {
	for _, kv := range selector {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--selector %q: want label=value", kv)
		}
		if body.Selector == nil {
			body.Selector = map[string]string{}
		}
		body.Selector[k] = v
	}
	for flag, v := range map[string]string{"start": start, "end": end} {
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("--%s %q: want an RFC 3339 time such as 2026-12-24T00:00:00Z", flag, v)
		}
		if flag == "start" {
			body.StartsAt = &t
		} else {
			body.EndsAt = &t
		}
	}
	if len(days) > 0 || weekly.From != "" || weekly.To != "" {
		weekly.Days = days
		body.Weekly = &weekly
	}
	return nil
}
