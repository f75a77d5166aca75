package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	mantisapi "github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/workflows"
)

// A freeze refuses a deployment through the API (409 naming it), an admin's
// override passes and the deployment runs to success, and a deployment started
// straight from a Temporal client onto the frozen target fails naming the freeze.
func TestFreezeRefusesAndOverridePasses(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("freeze"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)
	code, body := api(t, r, http.MethodPost, "/api/v1/freezes", `{"name":"release-freeze","reason":"release week"}`)
	require.Equal(t, http.StatusCreated, code, body)

	deploySpec := fmt.Sprintf(`{"name":"frozen","targets":["%s"],"steps":[{"name":"s","command":"echo hi"}]}`, f.targets[0])
	code, body = api(t, r, http.MethodPost, "/api/v1/deployments", deploySpec)
	require.Equal(t, http.StatusConflict, code, body)
	require.Equal(t, string(mantisapi.CodeFrozen), body["code"])
	require.Contains(t, body["detail"], `"release-freeze" (release week`)

	code, body = api(t, r, http.MethodPost, "/api/v1/deployments?override_freeze=true", deploySpec)
	require.Equal(t, http.StatusAccepted, code, body)
	waitDeployment(t, r, body["id"].(string), "succeeded")

	c, err := client.Dial(client.Options{HostPort: f.temporal.Address, Namespace: f.temporal.Namespace})
	require.NoError(t, err)
	defer c.Close()
	workflowID := uniqueName("by-hand")
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: workflowID, TaskQueue: "deployments-" + r.ID},
		workflows.DeploymentWorkflowType, spec.Deployment{Name: "by-hand", Targets: f.targets, Steps: []spec.Step{{Name: "s", Command: "echo hi"}}})
	require.NoError(t, err)
	err = run.Get(context.Background(), nil)
	require.Error(t, err, "a frozen deployment started from Temporal fails")
	require.Contains(t, err.Error(), "release-freeze")
}

// A schedule with an interval of a few seconds fires on the real Temporal server and
// its deployment runs to success; deleting it stops the runs.
func TestScheduleFiresAndDeploymentRuns(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("sched"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)
	name := uniqueName("every")
	body := fmt.Sprintf(`{"name":%q,"every":"3s","spec":{"name":"scheduled-ship","targets":["%s"],"steps":[{"name":"s","command":"echo tick"}]}}`,
		name, f.targets[0])
	code, created := apiRetrying503(t, r, http.MethodPost, "/api/v1/schedules", body)
	require.Equal(t, http.StatusCreated, code, created)
	t.Cleanup(func() { api(t, r, http.MethodDelete, "/api/v1/schedules/"+name, "") })

	require.Eventually(t, func() bool {
		code, list := api(t, r, http.MethodGet, "/api/v1/deployments?name=scheduled-ship&status=succeeded", "")
		require.Equal(t, http.StatusOK, code, list)
		return len(list["deployments"].([]any)) > 0
	}, 2*time.Minute, 500*time.Millisecond, "no scheduled deployment succeeded")

	code, _ = api(t, r, http.MethodDelete, "/api/v1/schedules/"+name, "")
	require.Equal(t, http.StatusNoContent, code)
}

// A webhook's delivery to a receiver that is down is retried and arrives, signed,
// once the receiver is back.
func TestWebhookDeliveredAfterReceiverIsBack(t *testing.T) {
	f := setupDispatchFixture(t, 1)
	r := startReplica(t, replicaOptions{ID: uniqueName("hook"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the receiver is down
	const secret = "e2e-webhook-secret-0123"
	code, hook := api(t, r, http.MethodPost, "/api/v1/webhooks",
		fmt.Sprintf(`{"url":"http://%s/hook","event_types":["deployment.succeeded"],"secret":%q,"allow_private_network":true}`, addr, secret))
	require.Equal(t, http.StatusCreated, code, hook)

	code, body := api(t, r, http.MethodPost, "/api/v1/deployments",
		fmt.Sprintf(`{"name":"hooked","targets":["%s"],"steps":[{"name":"s","command":"echo hi"}]}`, f.targets[0]))
	require.Equal(t, http.StatusAccepted, code, body)
	id := body["id"].(string)
	waitDeployment(t, r, id, "succeeded")
	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1 AND attempts >= 1 AND status = 'pending'`,
			uuid.MustParse(hook["id"].(string))) == 1
	}, time.Minute, 100*time.Millisecond, "the first attempt never failed")

	got := serveSignedWebhooks(t, addr, secret)
	select {
	case p := <-got:
		require.Equal(t, "deployment.succeeded", p.Type)
		require.Equal(t, id, p.DeploymentID.String())
		require.True(t, strings.HasPrefix(fmt.Sprint(p.Data), "map["), "the event's data is an object")
	case <-time.After(2 * time.Minute):
		t.Fatal("the delivery never arrived after the receiver came back")
	}
}

// The plan of a spec names the targets each step then runs on. (The plan's batches
// follow the spec's rollout; while the Deployment workflow runs every target of a
// step in one window, the run is compared to the plan's single batch per step.)
func TestPlanMatchesRun(t *testing.T) {
	f := setupDispatchFixture(t, 3)
	r := startReplica(t, replicaOptions{ID: uniqueName("plan"), DatabaseURL: f.url, Temporal: f.temporal, PollInterval: "1s"})
	fakeExecutor(t, f, f.targets)
	deploySpec := fmt.Sprintf(`{"name":"planned","targets":["%s","%s","%s"],"steps":[{"name":"a","command":"echo a"},{"name":"b","command":"echo b"}]}`,
		f.targets[2], f.targets[0], f.targets[1])
	code, plan := api(t, r, http.MethodPost, "/api/v1/deployments?dry_run=true", deploySpec)
	require.Equal(t, http.StatusOK, code, plan)
	require.Zero(t, f.count(t, `SELECT count(*) FROM deployments`), "the plan created nothing")

	code, body := api(t, r, http.MethodPost, "/api/v1/deployments", deploySpec)
	require.Equal(t, http.StatusAccepted, code, body)
	d := waitDeployment(t, r, body["id"].(string), "succeeded")
	planSteps := plan["steps"].([]any)
	runSteps := d["steps"].([]any)
	require.Len(t, runSteps, len(planSteps))
	for i, ps := range planSteps {
		batches := ps.(map[string]any)["batches"].([]any)
		require.Len(t, batches, 1, "one batch without a rollout")
		var planned, ran []string
		for _, name := range batches[0].([]any) {
			planned = append(planned, name.(string))
		}
		for _, tr := range runSteps[i].(map[string]any)["targets"].([]any) {
			ran = append(ran, tr.(map[string]any)["target"].(string))
		}
		require.ElementsMatch(t, planned, ran, "step %d", i)
		require.Equal(t, f.targets, planned, "batches list targets in name order")
	}
}

// serveSignedWebhooks serves webhook deliveries on addr until the test ends and sends
// on the channel each one whose signature checks out with secret; others get 401.
func serveSignedWebhooks(t *testing.T, addr, secret string) <-chan mantisapi.WebhookPayload {
	t.Helper()
	got := make(chan mantisapi.WebhookPayload, 4)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		if err := webhook.Verify(secret, req.Header.Get(mantisapi.WebhookSignatureHeader), raw, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p mantisapi.WebhookPayload
		_ = json.Unmarshal(raw, &p)
		got <- p
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return got
}
