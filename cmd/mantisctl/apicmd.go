package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// The builders below make the commands that call the API once and print what it
// answered: a group of subcommands, "list", a create (or set) from flags, and a
// command of one name or ID such as "delete". Each command keeps its own help text,
// flags and printing; what they share is resolving the client, the call and the
// choice between data and text.

// apiRunE returns a RunE that resolves the API client of f and hands it to run.
func apiRunE(f *clientFlags, run func(cmd *cobra.Command, c *apiclient.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := f.client()
		if err != nil {
			return err
		}
		return run(cmd, c, args)
	}
}

// commandGroup is a command of no arguments that only holds subs.
func commandGroup(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(subs...)
	return cmd
}

// listRunE returns a RunE that fetches the items with list and prints them with
// show in the output format.
func listRunE[T any](f *clientFlags, list func(*apiclient.Client, context.Context) ([]T, error),
	show func(io.Writer, outputFormat, []T) error,
) func(*cobra.Command, []string) error {
	return apiRunE(f, func(cmd *cobra.Command, c *apiclient.Client, _ []string) error {
		items, err := list(c, cmd.Context())
		if err != nil {
			return err
		}
		return show(cmd.OutOrStdout(), f.format, items)
	})
}

// listCommand is a "list" subcommand, described by short, that runs listRunE.
func listCommand[T any](f *clientFlags, short string, list func(*apiclient.Client, context.Context) ([]T, error),
	show func(io.Writer, outputFormat, []T) error,
) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  listRunE(f, list, show),
	}
}

// printResult prints v as data when format is structured, and otherwise writes
// text about it for people.
func printResult[T any](out io.Writer, format outputFormat, v T, text func(io.Writer, T)) error {
	if format.structured() {
		return printData(out, format, v)
	}
	text(out, v)
	return nil
}

// printAck acknowledges a call that answered nothing: it prints record as data when
// format is structured, and otherwise the line text.
func printAck(out io.Writer, format outputFormat, record any, text string) error {
	return printResult(out, format, record, func(out io.Writer, _ any) { fmt.Fprintln(out, text) })
}

// createRunE returns a RunE that makes a request body from the arguments (and the
// flags that body has bound), sends it with send and prints what the API answered:
// as data, or as text writes it. An error of body is returned before the client is
// resolved.
func createRunE[B, T any](f *clientFlags, body func(args []string) (B, error),
	send func(*apiclient.Client, context.Context, B) (T, error), text func(io.Writer, T),
) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		b, err := body(args)
		if err != nil {
			return err
		}
		return apiRunE(f, func(cmd *cobra.Command, c *apiclient.Client, _ []string) error {
			answer, err := send(c, cmd.Context(), b)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), f.format, answer, text)
		})(cmd, args)
	}
}

// nameArg returns a body for createRunE that sets *name (a field of *body) to the
// argument and answers *body, whose other fields the command's flags have bound.
func nameArg[B any](body *B, name *string) func(args []string) (B, error) {
	return func(args []string) (B, error) {
		*name = args[0]
		return *body, nil
	}
}

// argCommand describes a command of one argument, a name or an ID, that calls the
// API with it and prints the answer.
type argCommand[T any] struct {
	use, short string
	// complete, when not nil, completes the argument.
	complete cobra.CompletionFunc
	// call calls the API with the argument.
	call func(c *apiclient.Client, ctx context.Context, arg string) (T, error)
	// show prints the answer to the call with arg in the output format.
	show func(out io.Writer, format outputFormat, arg string, answer T) error
}

// command is the cobra command that a describes.
func (a argCommand[T]) command(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               a.use,
		Short:             a.short,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.complete,
		RunE: apiRunE(f, func(cmd *cobra.Command, c *apiclient.Client, args []string) error {
			answer, err := a.call(c, cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.show(cmd.OutOrStdout(), f.format, args[0], answer)
		}),
	}
}

// noAnswer adapts an API call that answers nothing but an error to argCommand.call.
func noAnswer(call func(*apiclient.Client, context.Context, string) error) func(*apiclient.Client, context.Context, string) (struct{}, error) {
	return func(c *apiclient.Client, ctx context.Context, arg string) (struct{}, error) {
		return struct{}{}, call(c, ctx, arg)
	}
}

// deleteCommand is a command of one argument (use names it) that deletes with del
// and says "deleted <what> <argument>", in every output format.
func deleteCommand(f *clientFlags, use, short, what string, del func(*apiclient.Client, context.Context, string) error) *cobra.Command {
	return argCommand[struct{}]{
		use:   use,
		short: short,
		call:  noAnswer(del),
		show: func(out io.Writer, _ outputFormat, arg string, _ struct{}) error {
			fmt.Fprintf(out, "deleted %s %s\n", what, arg)
			return nil
		},
	}.command(f)
}
