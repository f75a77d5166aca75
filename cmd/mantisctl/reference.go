package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// referenceCommand is the hidden `mantisctl reference-markdown`: it prints the command
// tree as Markdown, for docs/reference/mantisctl.md (tools/docgen, `make docs`).
func referenceCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "reference-markdown",
		Short:  "Print the command reference as Markdown (make docs)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			writeReference(cmd.OutOrStdout(), root)
			return nil
		},
	}
}

// writeReference writes every visible command under root, depth first, each with its
// usage, help and flags; the global flags once, at the top.
func writeReference(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, "## Global flags\n\nEvery command takes these.\n\n")
	writeFlags(w, root.PersistentFlags())
	fmt.Fprintf(w, "\n## `%s`\n\n```text\n%s\n```\n", root.Name(), strings.TrimSpace(root.Long))
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			writeCommand(w, sub)
			walk(sub)
		}
	}
	walk(root)
}

func writeCommand(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "\n## `%s`\n\n%s.\n\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."))
	fmt.Fprintf(w, "```text\n%s\n```\n\n", c.UseLine())
	if len(c.Aliases) > 0 {
		fmt.Fprintf(w, "Aliases: `%s`.\n\n", strings.Join(c.Aliases, "`, `"))
	}
	// Cobra's own completion commands explain themselves in --help.
	if long := strings.TrimSpace(c.Long); long != "" && long != c.Short && !strings.HasPrefix(c.CommandPath(), "mantisctl completion") {
		fmt.Fprintf(w, "```text\n%s\n```\n\n", long)
	}
	if ex := strings.TrimRight(c.Example, "\n "); ex != "" {
		fmt.Fprintf(w, "Examples:\n\n```sh\n%s\n```\n\n", ex)
	}
	if c.HasAvailableSubCommands() && !c.Runnable() {
		fmt.Fprintf(w, "Subcommands: run one of those below.\n")
		return
	}
	writeFlags(w, c.LocalNonPersistentFlags())
}

// writeFlags writes the visible flags of fs as a table, defaults that depend on
// the machine (the user's configuration directory) written as they are on most.
func writeFlags(w io.Writer, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := "–"
		if f.DefValue != "" && f.DefValue != "[]" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			def = "`" + portableDefault(f.DefValue) + "`"
		}
		usage := strings.ReplaceAll(strings.ReplaceAll(f.Usage, "|", `\|`), "\n", " ")
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", name, f.Value.Type(), def, usage))
	})
	if len(rows) == 0 {
		fmt.Fprintf(w, "No flags of its own.\n")
		return
	}
	fmt.Fprintf(w, "| flag | type | default | description |\n|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
}

// portableDefault writes the user's configuration directory in a default as ~/.config.
func portableDefault(s string) string {
	if dir, err := os.UserConfigDir(); err == nil && dir != "" {
		s = strings.ReplaceAll(s, dir, "~/.config")
	}
	return s
}
