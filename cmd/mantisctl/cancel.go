package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// newCancelCommand asks for a deployment to be cancelled.
func newCancelCommand(f *clientFlags) *cobra.Command {
	return argCommand[struct{}]{
		use:      "cancel ID",
		short:    "Cancel a deployment: what has not started is stopped, running commands are killed",
		complete: completeDeploymentIDs(f),
		call:     noAnswer((*apiclient.Client).CancelDeployment),
		show: func(out io.Writer, format outputFormat, id string, _ struct{}) error {
			return printAck(out, format, map[string]string{"id": id, "status": api.StatusCancelling}, "cancelling "+id)
		},
	}.command(f)
}
