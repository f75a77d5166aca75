package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// contextView is one context as `config get-contexts` prints it; the token is never
// shown.
type contextView struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	clientSettings
}

func newConfigCommand(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and switch the contexts (servers) of the client config file",
		Long: `The client config file (--client-config) can name several servers as contexts:

  current-context = "staging"

  [contexts.staging]
  server = "https://mandible.staging.example:8443"
  token_file = "/home/me/.config/mantis/staging.token"
  ca_cert = "/home/me/.config/mantis/ca.pem"

  [contexts.prod]
  server = "https://mandible.example:8443"
  token_file = "/home/me/.config/mantis/prod.token"

--context NAME (or ` + envContext + `) picks one for a command, current-context otherwise;
with no context the file's top-level server, token_file and ca_cert keys apply. A
context uses only its own keys. --server, --token-file, ` + envServer + `, ` + envToken + ` and
` + envCACert + ` still take precedence over the file.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newUseContextCommand(f), newGetContextsCommand(f), newCurrentContextCommand(f))
	return cmd
}

func newUseContextCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:               "use-context NAME",
		Short:             "Make NAME the current context of the client config file",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeContexts(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := setCurrentContext(f.configPath, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "switched to context %q\n", args[0])
			return nil
		},
	}
}

func newGetContextsCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts of the client config file; * marks the one in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := loadClientFile(f.configPath)
			if err != nil {
				return err
			}
			inUse := first(f.contextName, os.Getenv(envContext), file.CurrentContext)
			views := make([]contextView, 0, len(file.Contexts))
			for _, name := range file.contextNames() {
				views = append(views, contextView{Name: name, Current: name == inUse, clientSettings: file.Contexts[name]})
			}
			if f.format.structured() {
				return printData(cmd.OutOrStdout(), f.format, views)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CURRENT\tNAME\tSERVER")
			for _, v := range views {
				mark := ""
				if v.Current {
					mark = "*"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", mark, v.Name, v.Server)
			}
			return w.Flush()
		},
	}
}

func newCurrentContextCommand(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the context in use (--context, " + envContext + ", or the file's current-context)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			file, err := loadClientFile(f.configPath)
			if err != nil {
				return err
			}
			name := first(f.contextName, os.Getenv(envContext), file.CurrentContext)
			if name == "" {
				return invalidInput(fmt.Errorf("no context in use: %s sets no %s", f.configPath, currentContextKey))
			}
			fmt.Fprintln(cmd.OutOrStdout(), name)
			return nil
		},
	}
}

// completeContexts completes the context names of the client config file.
func completeContexts(f *clientFlags) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		file, err := loadClientFile(f.configPath)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return file.contextNames(), cobra.ShellCompDirectiveNoFileComp
	}
}
