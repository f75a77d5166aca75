package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// targetNames decodes mantisctl's JSON list of targets into their names.
func targetNames(t *testing.T, r result) []string {
	t.Helper()
	requireCode(t, ExitOK, r)
	var ts []api.Target
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ts), r.stdout)
	names := []string{}
	for _, tg := range ts {
		names = append(names, tg.Name)
	}
	return names
}

// mantisctl targets lists every target, or the first --limit, and --selector keeps
// those whose labels hold every key=value; targets get shows one.
func TestTargetsSelectorAndLimit(t *testing.T) {
	url := apiServer(t)
	for _, reg := range [][]string{
		{"web-1", "--label", "role=web", "--label", "env=prod"}, {"web-2", "--label", "role=web,env=test"},
		{"db-1", "--label", "role=db", "--label", "env=prod"}, {"cache-1"},
	} {
		r := mantisctl(t, against(t, url, append([]string{"targets", "register", "--mode", "poll"}, reg...)...)...)
		requireCode(t, ExitOK, r)
	}
	require.Equal(t, []string{"cache-1", "db-1", "web-1", "web-2"}, targetNames(t, mantisctl(t, against(t, url, "targets", "-o", "json")...)))
	require.Equal(t, []string{"cache-1", "db-1"}, targetNames(t, mantisctl(t, against(t, url, "targets", "--limit", "2", "-o", "json")...)))
	require.Equal(t, []string{"web-1", "web-2"}, targetNames(t, mantisctl(t, against(t, url, "targets", "--selector", "role=web", "-o", "json")...)))
	require.Equal(t, []string{"db-1", "web-1"}, targetNames(t, mantisctl(t, against(t, url, "targets", "--selector", "env=prod", "-o", "json")...)))
	require.Equal(t, []string{"web-1"}, targetNames(t, mantisctl(t, against(t, url, "targets", "--selector", "role=web,env=prod", "-o", "json")...)))
	require.Equal(t, []string{}, targetNames(t, mantisctl(t, against(t, url, "targets", "--selector", "role=cache", "-o", "json")...)))

	r := mantisctl(t, against(t, url, "targets", "--limit", "-1")...)
	requireCode(t, ExitUsage, r)

	r = mantisctl(t, against(t, url, "targets", "get", "web-2", "-o", "json")...)
	requireCode(t, ExitOK, r)
	var one api.Target
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &one))
	require.Equal(t, map[string]string{"role": "web", "env": "test"}, one.Labels)
	r = mantisctl(t, against(t, url, "targets", "get", "ghost")...)
	requireCode(t, ExitUsage, r) // a name that names nothing
	require.Contains(t, r.stderr, "no registered target named")
}
