package main

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
)

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make API tokens and the lines of Mandible's token file (http.token_file)",
		Long: "Make API tokens and the lines of Mandible's token file (http.token_file). A token's\n" +
			"--scope is what it may do.\n\n" + apitoken.ScopeHelp,
	}
	var (
		name  string
		scope string
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Print a new random token, and its entry for the token file (the file holds only its SHA-256)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := apitoken.Scope(scope)
			if !s.Valid() {
				return invalidInput(fmt.Errorf("--scope: must be read, deploy or admin, got %q", scope))
			}
			secret, err := apitoken.NewSecret()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "# The token: give it to its user, who keeps it in a file (mantisctl --token-file) or in %s.\n", envToken)
			fmt.Fprintf(out, "# Mandible never stores it; it is not shown again.\n%s\n\n", secret)
			fmt.Fprintf(out, "# Append to the token file, then send Mandible SIGHUP:\n%s", apitoken.FileLine(name, s, secret))
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "the token's name, recorded on everything it writes (required)")
	create.Flags().StringVar(&scope, "scope", string(apitoken.ScopeRead), "read, deploy or admin (mantisctl token --help says what each allows)")
	_ = create.MarkFlagRequired("name")

	hash := &cobra.Command{
		Use:   "hash",
		Short: "Read an existing token from standard input and print its token-file entry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := apitoken.Scope(scope)
			if !s.Valid() {
				return invalidInput(fmt.Errorf("--scope: must be read, deploy or admin, got %q", scope))
			}
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			secret := strings.TrimSpace(line)
			if secret == "" {
				return fmt.Errorf("reading the token from standard input: %v", err)
			}
			fmt.Fprint(cmd.OutOrStdout(), apitoken.FileLine(name, s, secret))
			return nil
		},
	}
	hash.Flags().StringVar(&name, "name", "", "the token's name (required)")
	hash.Flags().StringVar(&scope, "scope", string(apitoken.ScopeRead), "read, deploy or admin (mantisctl token --help says what each allows)")
	_ = hash.MarkFlagRequired("name")
	cmd.AddCommand(create, hash)
	return cmd
}
