package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/workers"
	"github.com/mantis-deploy/mantis/workflows"
)

// approvalStandIn plays the Deployment's activities so that a deployment created
// through the API waits at its approval step: the contract is the API's, the
// workflow's own behaviour is tested in package workflows and end to end.
type approvalStandIn struct{}

func (approvalStandIn) StartDeployment(_ context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
	id, err := activityio.DeploymentIDFor(in.WorkflowID, in.Spec)
	return activityio.StartDeploymentResult{DeploymentID: id.String(), TargetCount: 1}, err
}
func (approvalStandIn) StartStep(context.Context, activityio.StartStepInput) error   { return nil }
func (approvalStandIn) FinishStep(context.Context, activityio.FinishStepInput) error { return nil }
func (approvalStandIn) SkipSteps(context.Context, activityio.SkipStepsInput) error   { return nil }
func (approvalStandIn) SetWaiting(context.Context, activityio.SetWaitingInput) error { return nil }
func (approvalStandIn) CancelDeploymentWork(context.Context, string) (int, error)    { return 0, nil }
func (approvalStandIn) AdvanceStep(context.Context, activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	return domain.StepProgress{Total: 1, Enqueued: 1, Succeeded: 1, Done: true, Status: domain.StepSucceeded}, nil
}
func (approvalStandIn) FinishDeployment(_ context.Context, in activityio.FinishDeploymentInput) (string, error) {
	return in.Status, nil
}
func (approvalStandIn) RecordDecision(_ context.Context, in activityio.RecordDecisionInput) (api.Decision, error) {
	return api.Decision{Decision: in.Decision, By: in.By, At: in.At, Step: in.Step, Comment: in.Comment}, nil
}

// decisionExchanges creates a deployment whose first step is an approval, runs its
// workflow on a worker with stand-in activities, and takes decisions through the
// document: refusals first (the author's own approve among them), then another
// token's approval.
func (b *contractBundle) decisionExchanges(t *testing.T) {
	t.Helper()
	R, D, A := contractRead, contractDeploy, contractAdmin
	gated := `{"name":"gated","targets":["web-1"],"steps":[{"name":"ok","kind":"approval","approvers":["ci","ops"]},{"name":"s","command":"true"}]}`
	var created api.CreatedDeployment
	require.NoError(t, json.Unmarshal(b.call(t, exchange{method: "POST", path: "/api/v1/deployments", token: D, body: gated, want: 202}), &created))
	c := runStandInWorker(t, created.ID.String())
	path := "/api/v1/deployments/" + created.ID.String() + "/decisions"
	waitForApproval(t, c, created.ID.String())
	for _, ex := range []exchange{
		{method: "POST", path: path, token: D, body: `{"decision":"retry"}`, want: 409},
		{method: "POST", path: path, token: D, body: `{"decision":"maybe"}`, want: 400, invalid: true},
		{method: "POST", path: path, token: D, body: `{"decision":"approve","extra":1}`, want: 400, invalid: true},
		{method: "POST", path: path, token: R, body: `{"decision":"approve"}`, want: 403},
		{method: "POST", path: "/api/v1/deployments/00000000-0000-0000-0000-000000000001/decisions", token: D, body: `{"decision":"approve"}`, want: 404},
		{method: "POST", path: path, token: D, body: `{"decision":"approve","comment":"my own"}`, want: 403},
		{method: "POST", path: path, token: A, body: `{"decision":"approve","comment":"reviewed"}`, want: 200},
		{method: "GET", path: path, token: R, want: 200},
		{method: "GET", path: "/api/v1/deployments/not-a-uuid/decisions", token: R, want: 400},
	} {
		b.call(t, ex)
	}
}

// runStandInWorker runs the deployment's workflow on a worker with stand-in activities,
// on the task queue the API started it on.
func runStandInWorker(t *testing.T, id string) client.Client {
	t.Helper()
	tsrv := testenv.TemporalServer(t)
	c, err := client.Dial(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	// The workflow sets Mantis's search attributes, which Mandible registers at start-up:
	// on a fresh server no Mandible may have run yet.
	require.NoError(t, workers.PrepareNamespace(context.Background(), workers.NamespaceSetup{
		Client: c, Namespace: tsrv.Namespace, Keys: workflows.SearchAttributes(), Mode: config.SearchAttributesRegister,
		Wait: time.Minute, Logger: slog.New(slog.DiscardHandler),
	}))
	d, err := c.DescribeWorkflow(context.Background(), workflows.DeploymentWorkflowID(id), "")
	require.NoError(t, err)
	w := worker.New(c, d.TaskQueueName, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowType})
	w.RegisterActivity(&approvalStandIn{})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return c
}

// waitForApproval waits until the deployment's workflow waits for an approval.
func waitForApproval(t *testing.T, c client.Client, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(context.Background(), workflows.DeploymentWorkflowID(id), "", workflows.ProgressQuery)
		var p workflows.DeploymentProgressView
		return err == nil && v.Get(&p) == nil && p.Waiting != nil
	}, time.Minute, 100*time.Millisecond, "the deployment never waited for its approval")
}
