package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workflows"
)

// Targets of the resume test: poll-mode and listen-mode agents, each its own process.
const (
	resumePollAgents   = 12
	resumeListenAgents = 8
)

// startResumeFleet starts one Thorax and resumePollAgents poll plus
// resumeListenAgents listen agents, and returns the targets' names, sorted.
func startResumeFleet(t *testing.T, c *execCluster) []string {
	t.Helper()
	th := c.startThorax(t)
	instance := c.waitRegistered(t, th)
	var names []string
	var polls []*mantisProcess
	for range resumePollAgents {
		a := c.startPollAgent(t, th)
		polls = append(polls, a)
		names = append(names, a.Name)
	}
	for range resumeListenAgents {
		a := c.startListenAgent(t)
		c.registerListenTarget(t, a)
		names = append(names, a.Name)
	}
	for _, a := range polls {
		c.waitPollTarget(t, a, instance)
	}
	sort.Strings(names)
	return names
}

// runLines counts the lines a step's command appended to its per-target file.
func runLines(t *testing.T, dir, step, target string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, step+"-"+target))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}

// requestsPerTarget counts a deployment's dispatch requests per target and step.
func requestsPerTarget(t *testing.T, c *execCluster, id string) map[string]map[int]int {
	t.Helper()
	rows, err := c.pool.Query(c.ctx, `SELECT t.name, p.step_position, count(*) FROM pending_dispatch_requests p
		JOIN targets t ON t.id = p.target_id WHERE p.deployment_id = $1 GROUP BY 1, 2`, uuid.MustParse(id))
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]map[int]int{}
	for rows.Next() {
		var name string
		var step, n int
		require.NoError(t, rows.Scan(&name, &step, &n))
		if out[name] == nil {
			out[name] = map[int]int{}
		}
		out[name][step] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// newDeploymentLine finds the new deployment's id in what resume and rerun print.
var newDeploymentLine = regexp.MustCompile(`deployment ([0-9a-f-]{36}) (?:created: )?(?:resumes|runs) ([0-9a-f-]{36})`)

// A two-step deployment on 20 real agents (poll and listen) fails at its second step
// on half of them (a marker file is missing). Once the markers exist, `mantisctl
// resume --watch` creates a new deployment that runs the second step only, only on
// the targets that failed, and succeeds; the link is in the API, the old
// deployment's events and the workflow's memo. `mantisctl rerun` of the resumed one
// runs the same spec again.
func TestResumeRunsTheFailedStepOnTheFailedTargetsOnly(t *testing.T) {
	c := setupExecCluster(t, 30*time.Second) // 20 agents on a loaded machine: a generous heartbeat timeout
	targets := startResumeFleet(t, c)
	r := c.mandible.replica
	dir := t.TempDir()
	var failing, passing []string
	for i, name := range targets {
		if i%2 == 1 {
			failing = append(failing, name)
			continue
		}
		passing = append(passing, name)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ok-"+name), nil, 0o600))
	}
	quoted := make([]string, len(targets))
	for i, n := range targets {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	spec := fmt.Sprintf(`{"name":"resumable","targets":[%s],"steps":[
		{"name":"prepare","command":"echo run >> %s/prepare-$MANTIS_TARGET"},
		{"name":"verify","command":"echo run >> %s/verify-$MANTIS_TARGET; test -e %s/ok-$MANTIS_TARGET"}]}`,
		strings.Join(quoted, ","), dir, dir, dir)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	old := created["id"].(string)
	waitDeployment(t, r, old, "failed")
	for _, name := range failing {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ok-"+name), nil, 0o600))
	}

	began := time.Now()
	out, exit := mantisctl(t, r, "resume", old, "--watch")
	require.Equal(t, 0, exit, out)
	t.Logf("mantisctl resume --watch: %d failed targets of %d resumed and succeeded in %s", len(failing), len(targets), time.Since(began).Round(10*time.Millisecond))
	m := newDeploymentLine.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	resumed := m[1]
	require.Equal(t, old, m[2])
	require.Contains(t, out, "deployment resumable SUCCEEDED")

	d := waitDeployment(t, r, resumed, "succeeded")
	require.Equal(t, old, d["previous_deployment_id"])
	require.Equal(t, "resume", d["relation"])
	require.EqualValues(t, 1, d["from_step"])
	require.Len(t, d["steps"], 1)
	require.Equal(t, "verify", d["steps"].([]any)[0].(map[string]any)["name"])
	perTarget := requestsPerTarget(t, c, resumed)
	require.Len(t, perTarget, len(failing), "only the failed targets ran")
	for _, name := range failing {
		require.Equal(t, map[int]int{0: 1}, perTarget[name], "%s ran the resumed deployment's only step once", name)
	}
	for _, name := range targets {
		require.Equal(t, 1, runLines(t, dir, "prepare", name), "%s: the first step did not run again", name)
	}
	for _, name := range failing {
		require.Equal(t, 2, runLines(t, dir, "verify", name), "%s: the failed step ran again", name)
	}
	for _, name := range passing {
		require.Equal(t, 1, runLines(t, dir, "verify", name), "%s: a target that succeeded did not run again", name)
	}
	var events int
	require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT count(*) FROM deployment_events WHERE deployment_id = $1
		AND type = 'deployment.resumed_as' AND data->>'new_deployment_id' = $2`, uuid.MustParse(old), resumed).Scan(&events))
	require.Equal(t, 1, events, "the old deployment's stream names the new one")
	requireMemo(t, resumed, map[string]any{httpapi.MemoPreviousDeployment: old, httpapi.MemoRelation: "resume", httpapi.MemoFromStep: float64(1)})

	out, exit = mantisctl(t, r, "rerun", resumed)
	require.Equal(t, 0, exit, out)
	m = newDeploymentLine.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	rerun := m[1]
	require.Equal(t, resumed, m[2])
	d = waitDeployment(t, r, rerun, "succeeded")
	require.Equal(t, resumed, d["previous_deployment_id"])
	require.Equal(t, "rerun", d["relation"])
	require.Nil(t, d["from_step"])
	perTarget = requestsPerTarget(t, c, rerun)
	require.Len(t, perTarget, len(failing), "the re-run runs the resumed deployment's spec: the same targets")
	for _, name := range failing {
		require.Equal(t, 3, runLines(t, dir, "verify", name), "%s: the re-run ran the step again", name)
	}
	requireMemo(t, rerun, map[string]any{httpapi.MemoPreviousDeployment: resumed, httpapi.MemoRelation: "rerun"})
}

// requireMemo checks the link in the memo of deployment id's workflow.
func requireMemo(t *testing.T, id string, want map[string]any) {
	t.Helper()
	tc := testenv.TemporalServer(t)
	cl, err := client.Dial(client.Options{HostPort: tc.Address, Namespace: tc.Namespace})
	require.NoError(t, err)
	defer cl.Close()
	desc, err := rawDescription(cl.DescribeWorkflow(context.Background(), workflows.DeploymentWorkflowID(id), ""))
	require.NoError(t, err)
	fields := desc.WorkflowExecutionInfo.GetMemo().GetFields()
	for k, v := range want {
		p, ok := fields[k]
		require.True(t, ok, "memo %s", k)
		var got any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &got))
		require.Equal(t, v, got, "memo %s", k)
	}
	if _, ok := want[httpapi.MemoFromStep]; !ok {
		require.NotContains(t, fields, httpapi.MemoFromStep)
	}
}
