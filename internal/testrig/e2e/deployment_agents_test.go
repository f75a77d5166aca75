package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// A three-step deployment on a poll-mode and a listen-mode target, run by real
// Thorax and agent processes, succeeds; the API, the CLI and the Temporal workflow
// agree on its result.
//
//mantis:temporal-server
func TestDeploymentOnRealAgentsSucceedsAndEveryViewAgrees(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"three-steps","targets":[%q,%q],"steps":[
		{"name":"prepare","command":"echo prepare $(basename $PWD)"},
		{"name":"install","command":"echo install","env":{"RELEASE":"42"}},
		{"name":"verify","command":"test \"$RELEASE\" = '' && echo verified"}]}`, s.poll.Name, s.listen.Name)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)

	out, exit := mantisctl(t, r, "watch", id)
	require.Equal(t, 0, exit, out)
	require.Contains(t, out, "deployment three-steps SUCCEEDED")

	d := waitDeployment(t, r, id, "succeeded")
	for _, st := range d["steps"].([]any) {
		step := st.(map[string]any)
		require.Equal(t, "succeeded", step["status"])
		for _, tv := range step["targets"].([]any) {
			target := tv.(map[string]any)
			require.EqualValues(t, 0, target["exit_code"], target)
		}
	}

	c, err := client.Dial(client.Options{HostPort: testenv.TemporalServer(t).Address})
	require.NoError(t, err)
	defer c.Close()
	var result struct{ Status string }
	require.NoError(t, c.GetWorkflow(context.Background(), "deployment:"+id, "").Get(context.Background(), &result))
	require.Equal(t, "succeeded", result.Status)
}

// A failing step fails the deployment, later steps never run, and the analysis names
// the cause.
func TestFailingCommandOnRealAgentIsAnalysed(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"broken","targets":[%q],"steps":[
		{"name":"run-tool","command":"mantis-no-such-tool --version"},
		{"name":"never","command":"echo never"}]}`, s.poll.Name)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	d := waitDeployment(t, r, id, "failed")
	steps := d["steps"].([]any)
	require.Equal(t, "skipped", steps[1].(map[string]any)["status"])
	require.Empty(t, steps[1].(map[string]any)["targets"])

	var analysis map[string]any
	require.Eventually(t, func() bool {
		_, body := api(t, r, http.MethodGet, "/api/v1/deployments/"+id, "")
		step := body["deployment"].(map[string]any)["steps"].([]any)[0].(map[string]any)
		target := step["targets"].([]any)[0].(map[string]any)
		analysis, _ = target["analysis"].(map[string]any)
		return analysis != nil && analysis["status"] == "done"
	}, time.Minute, 200*time.Millisecond, "no analysis")
	require.Equal(t, "command_not_found", analysis["category"])
	require.Contains(t, analysis["summary"], "mantis-no-such-tool")

	out, exit := mantisctl(t, r, "get", id)
	require.Equal(t, 0, exit, out)
	require.Contains(t, out, "analysis: ")
}

// The deployments guide's `temporal workflow start` runs a real deployment (on the test
// replica's own deployment task queue: tests share one Temporal namespace).
//
//mantis:temporal-server
func TestTemporalCLIStartsADeployment(t *testing.T) {
	s := setupExec(t)
	r := s.mandible.replica
	bin, err := exec.LookPath("temporal")
	if err != nil {
		bin = devstackTemporal(t)
	}
	id := uuid.NewString()
	input, err := json.Marshal(map[string]any{
		"name": "from-temporal-cli", "targets": []string{s.listen.Name},
		"steps": []map[string]string{{"name": "hello", "command": "echo hello from the temporal CLI"}},
	})
	require.NoError(t, err)
	tc := testenv.TemporalServer(t)
	out, err := exec.Command(bin, "workflow", "start", "--address", tc.Address, "--namespace", tc.Namespace,
		"--type", "Deployment", "--task-queue", "deployments-"+r.ID, "--workflow-id", "deployment:"+id,
		"--input", string(input)).CombinedOutput()
	require.NoError(t, err, string(out))
	d := waitDeployment(t, r, id, "succeeded")
	require.Equal(t, "from-temporal-cli", d["name"])
}

// devstackTemporal finds the temporal CLI where make installs it.
func devstackTemporal(t *testing.T) string {
	t.Helper()
	p, err := devstack.TemporalCLI()
	require.NoError(t, err, "the temporal CLI is needed (make tools installs it)")
	return p
}
