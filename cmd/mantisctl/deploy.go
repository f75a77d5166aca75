package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

func newDeployCommand(f *clientFlags) *cobra.Command {
	var (
		file           string
		watch          bool
		wait           time.Duration
		plan           bool
		overrideFreeze bool
	)
	cmd := &cobra.Command{
		Use:   "deploy -f SPEC",
		Short: "Submit a deployment spec (YAML or JSON; - reads stdin)",
		Example: `  mantisctl deploy -f release.yaml --watch
  mantisctl deploy -f release.yaml --plan
  cat release.json | mantisctl deploy -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var body []byte
			if file == "-" {
				body, err = io.ReadAll(cmd.InOrStdin())
			} else {
				body, err = os.ReadFile(file)
			}
			if err != nil {
				return invalidInput(fmt.Errorf("reading spec: %w", err))
			}
			// Check locally first: every problem at once, without a round trip.
			if _, err := spec.Parse(body); err != nil {
				return invalidInput(err)
			}
			if plan {
				return planDeployment(cmd, f, c, body)
			}
			create := c.CreateDeployment
			if overrideFreeze {
				create = c.CreateDeploymentOverridingFreeze
			}
			created, err := create(cmd.Context(), body)
			if err != nil {
				return err
			}
			return afterCreate(cmd, f, c, created, watch, wait)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the spec file (YAML or JSON); - for stdin")
	_ = cmd.MarkFlagRequired("file")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the deployment until it ends (exit codes as watch's)")
	cmd.Flags().DurationVar(&wait, "watch-timeout", 0, "with --watch: give up waiting after this long and exit 6 (0: no limit)")
	cmd.Flags().BoolVar(&plan, "plan", false, "show the targets of each batch, offline targets, freezes and limits; create nothing")
	cmd.Flags().BoolVar(&overrideFreeze, "override-freeze", false, "deploy despite active freezes (admin token; recorded)")
	cmd.MarkFlagsMutuallyExclusive("plan", "watch")
	return cmd
}

// printCreateWarnings prints the create answer's warnings on stderr, so that stdout
// stays the answer alone and structured output stays parseable.
func printCreateWarnings(cmd *cobra.Command, created api.CreatedDeployment) {
	for _, w := range created.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: %s\n", w.Field, w.Warning)
	}
}

func afterCreate(cmd *cobra.Command, f *clientFlags, c *apiclient.Client, created api.CreatedDeployment, watch bool, wait time.Duration) error {
	out := cmd.OutOrStdout()
	printCreateWarnings(cmd, created)
	if !watch {
		if f.format.structured() {
			return printData(out, f.format, created)
		}
		verb := "created"
		if !created.Created {
			verb = "exists (same idempotency key)"
		}
		fmt.Fprintf(out, "deployment %s %s\n  watch:    mantisctl watch %s\n", created.ID, verb, created.ID)
		if u := created.Links[api.LinkTemporal]; u != "" {
			fmt.Fprintf(out, "  temporal: %s\n", u)
		}
		return nil
	}
	return watchDeployment(cmd.Context(), out, c, created.ID.String(), watchOptions{format: f.format, timeout: wait})
}
