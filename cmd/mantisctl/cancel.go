package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/api"
	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// newCancelCommand asks for a deployment to be cancelled.
func newCancelCommand(f *clientFlags) *cobra.Command {
	return argCommand[struct{}]{
		use:      "cancel ID",
		short:    "Cancel a deployment: what has not started is stopped, running commands are killed",
		complete: completeDeploymentIDs(f),
		call:     noAnswer((*apiclient.Client).CancelDeployment),
		show: func(out io.Writer, format outputFormat, id string, _ struct{}) error {
			return printResult(out, format, map[string]string{"id": id, "status": api.StatusCancelling}, func(out io.Writer, _ map[string]string) {
				fmt.Fprintf(out, "cancelling %s\n", id)
			})
		},
	}.command(f)
}
