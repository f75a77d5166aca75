// Command mantisctl is the Mantis command-line client, and runs the local development
// stack (`mantisctl dev up`).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		var exit exitCode
		if asExitCode(err, &exit) {
			os.Exit(int(exit))
		}
		if errors.Is(err, errDeploymentNotSucceeded) {
			os.Exit(1) // the summary said why
		}
		fmt.Fprintln(os.Stderr, "mantisctl:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "mantisctl",
		Short:         "Submit, watch and inspect Mantis deployments; run the local stack",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var flags clientFlags
	flags.register(root)
	root.AddCommand(newDevCommand(), newRequestsCommand(&flags), newTargetsCommand(&flags),
		newDeployCommand(&flags), newWatchCommand(&flags), newRunCommand(&flags), newGetCommand(&flags),
		newListCommand(&flags), newCancelCommand(&flags), newDLQCommand(&flags), newTokenCommand())
	return root
}
