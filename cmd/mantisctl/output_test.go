package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// jsonLines decodes out as one JSON object per line.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var got []T
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var v T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "line %q", sc.Text())
		got = append(got, v)
	}
	return got
}

// watch -o jsonl prints each event as it arrives, one object per line, then the
// deployment as it ended; -o json and -o yaml print only the deployment.
func TestWatchPrintsEventsAsJSONLines(t *testing.T) {
	t.Parallel()
	evs := []events.Type{events.StepStarted, events.TargetRunning, events.TargetFailed, events.StepFailed, events.DeploymentFailed}
	fake, url := newFakeAPI(t, "running", evs...)
	r := mantisctl(t, against(t, url, "watch", fake.deployment.ID.String(), "-o", "jsonl")...)
	requireCode(t, ExitFailed, r)
	lines := jsonLines[eventLine](t, r.stdout)
	require.Len(t, lines, len(evs)+1)
	for i, typ := range evs {
		require.Equal(t, string(typ), lines[i].Type)
		require.Equal(t, fmt.Sprint(i+1), lines[i].ID)
	}
	last := lines[len(lines)-1]
	require.Equal(t, summaryLineType, last.Type)
	var d api.Deployment
	require.NoError(t, json.Unmarshal(last.Data, &d))
	require.Equal(t, "failed", d.Status)

	r = mantisctl(t, against(t, url, "watch", fake.deployment.ID.String(), "-o", "json")...)
	requireCode(t, ExitFailed, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d), "one JSON document:\n%s", r.stdout)
	require.Equal(t, fake.deployment.ID, d.ID)

	r = mantisctl(t, against(t, url, "get", fake.deployment.ID.String(), "-o", "yaml")...)
	requireCode(t, ExitOK, r)
	d = api.Deployment{}
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &d))
	require.Equal(t, "failed", d.Status)
	require.Contains(t, r.stdout, "status: failed\n")
}

// The list commands print every format, and --all follows the next-page links of the
// real API: jsonl page by page, json as one array.
func TestListFormatsAndAllPages(t *testing.T) {
	url := apiServer(t)
	_, err := runCLI(t, against(t, url, "targets", "register", "web-1", "--mode", "poll")...)
	require.NoError(t, err)
	c, err := (&clientFlags{server: url, token: apiToken, output: "text"}).client()
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, c.Do(context.Background(), "POST", "/api/v1/dispatch-requests",
			map[string]any{"requests": []map[string]string{{"idempotency_key": fmt.Sprint("k", i), "target": "web-1", "command": "uptime"}}}, nil))
	}

	r := mantisctl(t, against(t, url, "requests", "--limit", "2", "-o", "jsonl")...)
	requireCode(t, ExitOK, r)
	require.Len(t, jsonLines[api.DispatchRequest](t, r.stdout), 2, "without --all, one page")

	r = mantisctl(t, against(t, url, "requests", "--all", "--limit", "2", "-o", "jsonl")...)
	requireCode(t, ExitOK, r)
	reqs := jsonLines[api.DispatchRequest](t, r.stdout)
	require.Len(t, reqs, 5)
	seen := map[string]bool{}
	for _, q := range reqs {
		seen[q.IdempotencyKey] = true
	}
	require.Len(t, seen, 5, "each request once")

	r = mantisctl(t, against(t, url, "requests", "--all", "--limit", "2", "-o", "json")...)
	requireCode(t, ExitOK, r)
	var all []api.DispatchRequest
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &all))
	require.Len(t, all, 5)

	r = mantisctl(t, against(t, url, "requests", "--all", "--limit", "2")...)
	requireCode(t, ExitOK, r)
	require.Equal(t, 6, strings.Count(r.stdout, "\n"), "a header and five rows:\n%s", r.stdout)

	r = mantisctl(t, against(t, url, "targets", "-o", "yaml")...)
	requireCode(t, ExitOK, r)
	var ts []api.Target
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &ts))
	require.Equal(t, "web-1", ts[0].Name)

	r = mantisctl(t, against(t, url, "list", "--all", "-o", "json")...)
	requireCode(t, ExitOK, r)
	require.JSONEq(t, "[]", r.stdout)
}

func TestVersionFlagAndCommand(t *testing.T) {
	t.Parallel()
	r := mantisctl(t, "--version")
	requireCode(t, ExitOK, r)
	require.Regexp(t, `^mantisctl \S+ \(commit \S+, go1\.\d+`, r.stdout)

	r = mantisctl(t, "version", "-o", "json")
	requireCode(t, ExitOK, r)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info))
	require.Contains(t, info, "commit")
	require.Contains(t, info["go_version"], "go1.")
}
