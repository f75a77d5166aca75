// Command mantisctl is the Mantis command-line client, and runs the local development
// stack (`mantisctl dev up`).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	mantiscli "github.com/mantis-deploy/mantis/internal/cli"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes mantisctl with args and returns its exit code (see exitCodesHelp).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cli := newCLI()
	cli.root.SetArgs(args)
	cli.root.SetIn(stdin)
	cli.root.SetOut(stdout)
	cli.root.SetErr(stderr)
	err := cli.root.ExecuteContext(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, errWatchTimedOut) {
		err = fmt.Errorf("interrupted: %w", context.Canceled)
	}
	code := exitCodeOf(err, cli.started)
	if err != nil && !quiet(err) {
		fmt.Fprintln(stderr, "mantisctl:", err)
		if code == ExitUsage && !cli.started {
			fmt.Fprintln(stderr, "Run 'mantisctl --help' for usage.")
		}
	}
	return code
}

// quiet reports whether err needs no message: the summary or the child said why.
func quiet(err error) bool {
	var child exitCode
	return errors.As(err, &child) || errors.Is(err, errDeploymentFailed) || errors.Is(err, errDeploymentCancelled)
}

// cli is mantisctl's command tree, and whether the command's own code started (an
// error before that is a usage error).
type cli struct {
	root    *cobra.Command
	flags   *clientFlags
	started bool
}

func newCLI() *cli {
	c := &cli{flags: &clientFlags{}}
	root := &cobra.Command{
		Use:   "mantisctl",
		Short: "Submit, watch and inspect Mantis deployments; run the local stack",
		Long: "mantisctl submits, watches and inspects Mantis deployments, and runs the local stack.\n\n" +
			exitCodesHelp + "\n\n" + idempotencyHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Cobra checks required flags after this hook: check them here, so that
			// every error before the command's own code is a usage error.
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return err
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return err
			}
			if err := c.flags.validate(); err != nil {
				return err
			}
			c.started = true
			return nil
		},
	}
	mantiscli.SetVersion(root)
	c.flags.register(root)
	f := c.flags
	root.AddCommand(newDevCommand(), newRequestsCommand(f), newTargetsCommand(f),
		newDeployCommand(f), newWatchCommand(f), newRunCommand(f), newGetCommand(f),
		newListCommand(f), newCancelCommand(f), newDLQCommand(f), newTokenCommand(),
		newConfigCommand(f), newVersionCommand(f), newLimitsCommand(f))
	root.AddCommand(newLogsCommand(f))
	root.AddCommand(newFleetCommands(f)...)
	root.AddCommand(newDecisionCommands(f)...)
	root.AddCommand(newResumeCommand(f), newRerunCommand(f))
	root.AddCommand(newWorkflowsCommand(f))
	root.AddCommand(referenceCommand(root))
	c.root = root
	return c
}

// newRootCommand is mantisctl's command tree.
func newRootCommand() *cobra.Command { return newCLI().root }
