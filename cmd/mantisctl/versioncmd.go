package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/version"
)

func newVersionCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mantisctl's version, commit and Go version (as --version does; -o json for data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "mantisctl %s\n", info)
			return nil
		},
	}
}
