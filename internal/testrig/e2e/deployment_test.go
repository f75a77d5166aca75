package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/schema"
)

const apiToken = "test-token-0123456789abcdef"

// api calls a replica's HTTP API.
func api(t *testing.T, r *replica, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.HTTPAddr+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	if resp.StatusCode >= http.StatusInternalServerError {
		t.Logf("%s %s answered %d; the replica logged:\n%s", method, path, resp.StatusCode, r.errorLines())
	}
	return resp.StatusCode, out
}

// apiRetrying503 is api sent again, as the answer's Retry-After asks, while the replica
// answers 503 (a server it depends on did not answer in time), for up to a minute.
func apiRetrying503(t *testing.T, r *replica, method, path, body string) (int, map[string]any) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, out := api(t, r, method, path, body)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return code, out
		}
		time.Sleep(time.Second) // the Retry-After of writeServerError
	}
}

// fakeExecutor stands in for Thorax and its agents: it claims commands through the
// same query Thorax's FetchPendingCommands uses and stores a result per command, exit 0
// unless the command text says "fail".
func fakeExecutor(t *testing.T, f dispatchFixture, targets []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	instance, err := schema.RegisterInstance(ctx, f.pool, schema.NewInstance{Name: "fake-thorax", Version: "test"})
	require.NoError(t, err)
	_, err = schema.Heartbeat(ctx, f.pool, schema.HeartbeatRequest{Instance: instance, PollTargets: targets})
	require.NoError(t, err)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, _ = schema.Heartbeat(ctx, f.pool, schema.HeartbeatRequest{Instance: instance, PollTargets: targets})
			cmds, err := schema.FetchPendingCommands(ctx, f.pool, schema.FetchCommandsRequest{InstanceID: instance, PollTargets: targets, Max: 100})
			if err != nil {
				continue
			}
			for _, c := range cmds {
				res := schema.CommandResult{ExitCode: 0, Output: "ran " + c.Command + " on " + c.Target, StartedAt: time.Now(), FinishedAt: time.Now()}
				if strings.Contains(c.Command, "fail") {
					res.ExitCode, res.Output = 127, "sh: 1: deploy-tool: not found"
				}
				_, _ = schema.StoreCommandResult(ctx, f.pool, schema.ResultToStore{Instance: instance, Command: c.ID, Epoch: c.LeaseEpoch, Result: res})
			}
		}
	}()
}

func waitDeployment(t *testing.T, r *replica, id string, want string) map[string]any {
	t.Helper()
	var d map[string]any
	require.Eventually(t, func() bool {
		code, body := api(t, r, http.MethodGet, "/api/v1/deployments/"+id, "")
		if code == http.StatusNotFound {
			return false // a deployment started from Temporal is recorded by its first activity
		}
		require.Equal(t, http.StatusOK, code, body)
		d = body["deployment"].(map[string]any)
		return d["status"] == want
	}, 2*time.Minute, 200*time.Millisecond, "deployment %s never reached %s", id, want)
	return d
}

func TestDeploymentRunsStepsInOrderAndAgreesWithTemporal(t *testing.T) {
	f := setupDispatchFixture(t, 2)
	r := startReplica(t, replicaOptions{ID: uniqueName("dep"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)

	spec := fmt.Sprintf(`{"name":"release","priority":"high","targets":["%s","%s"],"idempotency_key":"%s",
		"steps":[{"name":"fetch","command":"echo fetch"},{"name":"install","command":"echo install"},{"name":"restart","command":"echo restart"}]}`,
		f.targets[0], f.targets[1], uniqueName("key"))
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)

	code, again := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusOK, code, again)
	require.Equal(t, id, again["id"], "the same idempotency key yields the same deployment")

	d := waitDeployment(t, r, id, "succeeded")
	steps := d["steps"].([]any)
	require.Len(t, steps, 3)
	for _, s := range steps {
		step := s.(map[string]any)
		require.Equal(t, "succeeded", step["status"], step["name"])
		require.Len(t, step["targets"], 2)
	}

	c, err := client.Dial(client.Options{HostPort: f.temporal.Address, Namespace: f.temporal.Namespace})
	require.NoError(t, err)
	defer c.Close()
	var result struct {
		Status string `json:"status"`
		Steps  []struct{ Name, Status string }
	}
	require.NoError(t, c.GetWorkflow(context.Background(), "deployment:"+id, "").Get(context.Background(), &result))
	require.Equal(t, "succeeded", result.Status, "Temporal and the API agree")
	require.Len(t, result.Steps, 3)

	// Every event of the deployment is in the log, in order.
	rows, err := f.pool.Query(f.ctx, `SELECT type FROM deployment_events WHERE deployment_id = $1 ORDER BY id`, uuid.MustParse(id))
	require.NoError(t, err)
	var types []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		types = append(types, s)
	}
	require.Equal(t, "deployment.started", types[0])
	require.Equal(t, "deployment.succeeded", types[len(types)-1])
	require.Contains(t, types, "step.started")
	require.Contains(t, types, "target.succeeded")
}

func TestFailingStepFailsTheDeploymentAndSkipsTheRest(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("fail"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)
	spec := fmt.Sprintf(`{"name":"broken","targets":["%s"],"steps":[
		{"name":"ok","command":"echo ok"},{"name":"bad","command":"fail deploy-tool"},{"name":"never","command":"echo never"}]}`, f.targets[0])
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	d := waitDeployment(t, r, created["id"].(string), "failed")
	steps := d["steps"].([]any)
	require.Equal(t, "succeeded", steps[0].(map[string]any)["status"])
	require.Equal(t, "failed", steps[1].(map[string]any)["status"])
	require.Equal(t, "skipped", steps[2].(map[string]any)["status"])
	require.Empty(t, steps[2].(map[string]any)["targets"], "a later step never ran")
	bad := steps[1].(map[string]any)["targets"].([]any)[0].(map[string]any)
	require.EqualValues(t, 127, bad["exit_code"])
}

func TestInvalidSpecsAndUnknownTargetsAreRefusedByField(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("inv"), DatabaseURL: f.url, Temporal: f.temporal})
	code, body := api(t, r, http.MethodPost, "/api/v1/deployments", `{"name":"","priority":"asap","steps":[{"name":"a","command":"","timeout":"x"}]}`)
	require.Equal(t, http.StatusBadRequest, code)
	fields := map[string]bool{}
	for _, fp := range body["error"].(map[string]any)["fields"].([]any) {
		fields[fp.(map[string]any)["field"].(string)] = true
	}
	for _, want := range []string{"name", "priority", "targets", "steps[0].command", "steps[0].timeout"} {
		require.True(t, fields[want], "missing %s in %v", want, fields)
	}
	code, body = api(t, r, http.MethodPost, "/api/v1/deployments", `{"name":"x","targets":["ghost"],"steps":[{"name":"a","command":"true"}]}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, fmt.Sprint(body), `unknown target "ghost"`)

	req, _ := http.NewRequest(http.MethodPost, "http://"+r.HTTPAddr+"/api/v1/deployments", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestCancelStopsADeployment(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("cancel"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	// No executor: the command stays queued until cancelled.
	spec := fmt.Sprintf(`{"name":"slow","targets":["%s"],"steps":[{"name":"wait","command":"sleep 600"},{"name":"after","command":"true"}]}`, f.targets[0])
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM command_queue WHERE deployment_id = $1`, uuid.MustParse(id)) == 1
	}, time.Minute, 100*time.Millisecond)
	code, body := api(t, r, http.MethodPost, "/api/v1/deployments/"+id+"/cancel", "")
	require.Equal(t, http.StatusAccepted, code, body)
	d := waitDeployment(t, r, id, "cancelled")
	steps := d["steps"].([]any)
	require.Equal(t, "cancelled", steps[0].(map[string]any)["status"])
	require.Equal(t, "skipped", steps[1].(map[string]any)["status"])
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status = 'cancelled'`, uuid.MustParse(id)))
	code, _ = api(t, r, http.MethodPost, "/api/v1/deployments/"+id+"/cancel", "")
	require.Equal(t, http.StatusConflict, code)
}
