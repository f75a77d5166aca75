package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workflows"
)

// legacyTokenName is the name the API gives the e2e replicas' one token
// (apitoken.Legacy): the decider the decisions record.
const legacyTokenName = "legacy-1"

// waitWaiting polls the deployment view until it waits for kind, and returns the
// waiting object.
func waitWaiting(t *testing.T, r *replica, id, kind string) map[string]any {
	t.Helper()
	var waiting map[string]any
	require.Eventually(t, func() bool {
		_, body := api(t, r, http.MethodGet, "/api/v1/deployments/"+id, "")
		d, _ := body["deployment"].(map[string]any)
		waiting, _ = d["waiting"].(map[string]any)
		return waiting != nil && waiting["kind"] == kind
	}, 2*time.Minute, 200*time.Millisecond, "deployment %s never waited for %s", id, kind)
	return waiting
}

// decide posts a decision and returns the status and answer.
func decide(t *testing.T, r *replica, id, decision, comment string) (int, map[string]any) {
	t.Helper()
	return api(t, r, http.MethodPost, "/api/v1/deployments/"+id+"/decisions",
		fmt.Sprintf(`{"decision":%q,"comment":%q}`, decision, comment))
}

// An approval step is approved through the API; a step with on_failure: ask that
// fails on one target (the first to take a lock) waits, is retried through the API on
// that target only, and succeeds; every decision is recorded with who and when.
func TestApprovalAndRetryOfAFailedStepOnRealAgents(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	dir := t.TempDir()
	spec := fmt.Sprintf(`{"name":"gated","targets":[%q,%q],"steps":[
		{"name":"go-ahead","kind":"approval","approvers":[%q],"timeout":"1h","allow_self_approval":true},
		{"name":"flaky","command":"echo run >> %s/runs; mkdir %s/lock 2>/dev/null && exit 3; echo ok","on_failure":"ask","approvers":[%q]},
		{"name":"after","command":"echo after"}]}`,
		s.poll.Name, s.listen.Name, legacyTokenName, dir, dir, legacyTokenName)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)

	w := waitWaiting(t, r, id, "approval")
	require.EqualValues(t, 0, w["step"])
	require.Equal(t, []any{legacyTokenName}, w["approvers"])
	code, refused := decide(t, r, id, "retry", "too early")
	require.Equal(t, http.StatusConflict, code, refused)
	require.Equal(t, "not_waiting", refused["code"], refused)
	require.NoFileExists(t, filepath.Join(dir, "runs"), "nothing runs before the approval")

	code, approved := decide(t, r, id, "approve", "change 42 reviewed")
	require.Equal(t, http.StatusOK, code, approved)
	require.Equal(t, legacyTokenName, approved["by"])
	require.EqualValues(t, 0, approved["step"])

	w = waitWaiting(t, r, id, "on_failure")
	require.EqualValues(t, 1, w["step"])
	requireProgressQuery(t, id, "on_failure")
	code, retried := decide(t, r, id, "retry", "lock released")
	require.Equal(t, http.StatusOK, code, retried)

	d := waitDeployment(t, r, id, "succeeded")
	require.Nil(t, d["waiting"], "nothing is waited for once it ended")
	runs, err := os.ReadFile(filepath.Join(dir, "runs"))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(runs), "run"), "two targets ran the step, then only the failed one again")
	flaky := d["steps"].([]any)[1].(map[string]any)
	require.Equal(t, "succeeded", flaky["status"])
	for _, tv := range flaky["targets"].([]any) {
		require.EqualValues(t, 0, tv.(map[string]any)["exit_code"], "each target's latest run succeeded")
	}

	code, list := api(t, r, http.MethodGet, "/api/v1/deployments/"+id+"/decisions", "")
	require.Equal(t, http.StatusOK, code)
	decisions := list["data"].([]any)
	require.Len(t, decisions, 2)
	for i, want := range []string{"approve", "retry"} {
		got := decisions[i].(map[string]any)
		require.Equal(t, want, got["decision"])
		require.Equal(t, legacyTokenName, got["by"])
		require.NotEmpty(t, got["at"])
	}
}

// A token the waiting step's approvers do not name is refused with 403, and nothing
// is recorded.
func TestDecisionByANonApproverIsForbidden(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"gated-for-others","targets":[%q],"steps":[
		{"name":"go-ahead","kind":"approval","approvers":["release-manager"]},
		{"name":"after","command":"echo after"}]}`, s.poll.Name)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	waitWaiting(t, r, id, "approval")
	code, refused := decide(t, r, id, "approve", "")
	require.Equal(t, http.StatusForbidden, code, refused)
	require.Contains(t, refused["detail"], "not among the approvers")
	_, list := api(t, r, http.MethodGet, "/api/v1/deployments/"+id+"/decisions", "")
	require.Empty(t, list["data"])
	code, _ = api(t, r, http.MethodPost, "/api/v1/deployments/"+id+"/cancel", "")
	require.Equal(t, http.StatusAccepted, code)
	d := waitDeployment(t, r, id, "cancelled")
	require.Nil(t, d["waiting"])
}

// requireProgressQuery asks the deployment's workflow, as any Temporal client can,
// what it waits for.
func requireProgressQuery(t *testing.T, id, kind string) {
	t.Helper()
	tc := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{HostPort: tc.Address, Namespace: tc.Namespace})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, workflows.DeploymentWorkflowID(id), "", workflows.ProgressQuery)
	require.NoError(t, err)
	var p workflows.DeploymentProgressView
	require.NoError(t, v.Get(&p))
	require.NotNil(t, p.Waiting)
	require.Equal(t, kind, p.Waiting.Kind)
	require.NotEmpty(t, p.Steps, "the steps that ended are counted")
}
