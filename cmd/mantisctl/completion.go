package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mantis-deploy/mantis/internal/apiclient"
)

// Bounds of the API calls made to complete a word: a shell waits for them.
const (
	completionTimeout = 3 * time.Second
	completionLimit   = 100
)

// completeDeploymentIDs completes the first argument with the ids of recent
// deployments, each described by its name and state.
func completeDeploymentIDs(f *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := f.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		ds, err := c.ListDeployments(ctx, nil, "", completionLimit)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, d := range ds {
			if id := d.ID.String(); strings.HasPrefix(id, toComplete) {
				out = append(out, cobra.CompletionWithDesc(id, d.Name+" "+d.Status))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTargetNames completes target names; after a comma (--targets a,b) it
// completes the name after the last comma.
func completeTargetNames(f *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, err := f.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		ts, err := apiclient.Targets.List(c, ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		prefix, partial := "", toComplete
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			prefix, partial = toComplete[:i+1], toComplete[i+1:]
		}
		var out []string
		for _, t := range ts {
			if strings.HasPrefix(t.Name, partial) {
				out = append(out, cobra.CompletionWithDesc(prefix+t.Name, t.Mode))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFirstTargetName completes a command's one target-name argument.
func completeFirstTargetName(f *clientFlags) cobra.CompletionFunc {
	names := completeTargetNames(f)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(cmd, args, toComplete)
	}
}
