package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
)

func newCancelCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "cancel ID",
		Short:             "Cancel a deployment: what has not started is stopped, running commands are killed",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDeploymentIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := c.CancelDeployment(cmd.Context(), args[0]); err != nil {
				return err
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, map[string]string{"id": args[0], "status": api.StatusCancelling})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancelling %s\n", args[0])
			return nil
		},
	}
}
