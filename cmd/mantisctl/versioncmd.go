package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/version"
)

// versionReport is `mantisctl version -o json`: mantisctl's own build at the top
// level (as it always was), and the server's beside it when one was asked.
type versionReport struct {
	version.Info
	Server    *version.Info `json:"server,omitempty"`
	ServerURL string        `json:"server_url,omitempty"`
}

func newVersionCommand(f *clientFlags) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print mantisctl's build and the build of the Mandible it talks to (-o json for data)",
		Long: `Print mantisctl's version, commit and Go version, then those of the Mandible replica
the configured server reaches (its /version, which needs no token). Without a configured
server only mantisctl's own line is printed; a server that does not answer is an error.
--client prints mantisctl's own build only, as --version does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			report := versionReport{Info: version.Get()}
			var serverErr error
			if !clientOnly {
				serverErr = serverVersion(cmd, f, &report)
			}
			if f.format.structured() {
				if err := printData(cmd.OutOrStdout(), f.format, report); err != nil {
					return err
				}
				return serverErr
			}
			fmt.Fprintf(cmd.OutOrStdout(), "mantisctl %s\n", report.Info)
			if report.Server != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "mandible  %s (%s)\n", *report.Server, report.ServerURL)
			}
			return serverErr
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print mantisctl's own build only")
	return cmd
}

// serverVersion fills the report's server part from the configured server's /version.
// No configured server is not an error: mantisctl's own build is still worth printing.
func serverVersion(cmd *cobra.Command, f *clientFlags, report *versionReport) error {
	c, err := f.client()
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "mandible: no server configured (%v)\n", err)
		return nil
	}
	var info version.Info
	if err := c.Do(cmd.Context(), "GET", "/version", nil, &info); err != nil {
		return fmt.Errorf("asking the server for its version: %w", err)
	}
	report.Server, report.ServerURL = &info, c.BaseURL
	return nil
}
