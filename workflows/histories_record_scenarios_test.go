package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/workflows"
)

// Events that mark how a run ended.
const (
	completed   = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	failed      = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
	canceled    = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
	continued   = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
	signaled    = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
	timerFired  = enumspb.EVENT_TYPE_TIMER_FIRED
	timerCancel = enumspb.EVENT_TYPE_TIMER_CANCELED
	timerStart  = enumspb.EVENT_TYPE_TIMER_STARTED
	cancelAsked = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
	upserted    = enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
	actFailed   = enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED
	marker      = enumspb.EVENT_TYPE_MARKER_RECORDED
)

// steps makes n steps named after their position.
func steps(names ...string) []spec.Step {
	out := make([]spec.Step, len(names))
	for i, n := range names {
		out[i] = spec.Step{Name: n, Command: "./deploy.sh " + n, Timeout: "2m", Env: map[string]string{"STAGE": n}}
	}
	return out
}

// runDeployment starts a deployment as Mandible's HTTP API does.
func runDeployment(s spec.Deployment) func(t *testing.T, r recorder) client.WorkflowRun {
	return func(t *testing.T, r recorder) client.WorkflowRun {
		id := uuid.NewString()
		s.DeploymentID = id
		return startWorkflow(t, r, workflows.DeploymentWorkflowID(id), temporal.SearchAttributes{}, workflows.DeploymentWorkflowType, s)
	}
}

// cancelWhenBlocked cancels the run once the stand-in's activity blocks.
func cancelWhenBlocked(t *testing.T, r recorder, run client.WorkflowRun, blocked <-chan struct{}) {
	t.Helper()
	select {
	case <-blocked:
	case <-time.After(time.Minute):
		require.FailNow(t, "the activity to cancel never started")
	}
	require.NoError(t, r.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
}

func deploymentScenarios() []scenario {
	success := newDeploymentStandIn("web-01", "web-02", "web-03")
	stepFailed := newDeploymentStandIn("web-01", "web-02", "web-03")
	stepFailed.failing["1/web-02"] = true
	onError := newDeploymentStandIn("web-01", "web-02", "web-03")
	onError.failing["0/web-03"] = true
	parallel := newDeploymentStandIn("web-01", "web-02", "web-03", "web-04", "web-05")
	parallel.perAwait, parallel.emptyFirstAwait = 1, true
	parallel.failing["1/web-04"] = true
	cancelled := newDeploymentStandIn("web-01", "web-02")
	cancelled.blockAt = 1
	enqueueFails := newDeploymentStandIn("web-01", "web-02")
	enqueueFails.enqueueFailsAt = 1

	onErrorSteps := steps("migrate", "deploy")
	onErrorSteps[0].ContinueOnError = true
	parallelSteps := steps("deploy", "smoke-test")
	parallelSteps[1].ContinueOnError = true
	return []scenario{
		{name: "deployment_multi_step_success", activities: success, want: []enumspb.EventType{upserted, completed},
			scheduled: map[string]int{"StartStep": 3, "FinishStep": 3, "FinishDeployment": 1},
			run:       runDeployment(spec.Deployment{Name: "web release", Targets: success.targets, Steps: steps("fetch", "migrate", "restart")})},
		{name: "deployment_step_failed", activities: stepFailed, want: []enumspb.EventType{failed},
			scheduled: map[string]int{"StartStep": 2, "FinishStep": 3},
			run:       runDeployment(spec.Deployment{Name: "web release", Priority: "high", Targets: stepFailed.targets, Steps: steps("fetch", "migrate", "restart")})},
		{name: "deployment_continue_on_error", activities: onError, want: []enumspb.EventType{completed},
			scheduled: map[string]int{"StartStep": 2, "FinishStep": 2},
			run:       runDeployment(spec.Deployment{Name: "web release", Targets: onError.targets, Steps: onErrorSteps})},
		{name: "deployment_max_parallel", activities: parallel, want: []enumspb.EventType{completed},
			scheduled: map[string]int{"EnqueueStepTargets": 8, "AwaitStepResults": 12},
			run:       runDeployment(spec.Deployment{Name: "rolling restart", Priority: "low", Targets: parallel.targets, MaxParallel: 2, Steps: parallelSteps})},
		{name: "deployment_step_error", activities: enqueueFails, want: []enumspb.EventType{actFailed, failed},
			scheduled: map[string]int{"CancelDeploymentWork": 1, "FinishStep": 3},
			run:       runDeployment(spec.Deployment{Name: "web release", Targets: enqueueFails.targets, Steps: steps("fetch", "migrate", "restart")})},
		{name: "deployment_cancelled", activities: cancelled, want: []enumspb.EventType{cancelAsked, canceled},
			scheduled: map[string]int{"CancelDeploymentWork": 1, "FinishStep": 3, "FinishDeployment": 1},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				t.Cleanup(func() { close(cancelled.release) })
				run := runDeployment(spec.Deployment{Name: "web release", Targets: cancelled.targets, Steps: steps("fetch", "migrate", "restart")})(t, r)
				cancelWhenBlocked(t, r, run, cancelled.blocked)
				return run
			}},
	}
}

// startDispatcher starts a replica's dispatcher as Mandible does.
func startDispatcher(t *testing.T, r recorder, in workflows.DispatcherInput) client.WorkflowRun {
	in.ReplicaID = "replay-" + uuid.NewString()[:8]
	id := workflows.DispatcherWorkflowID(in.ReplicaID)
	run := startWorkflow(t, r, id, temporal.NewSearchAttributes(workflows.ReplicaSearchAttribute.ValueSet(in.ReplicaID)),
		workflows.DispatcherWorkflowType, in)
	// The run continues as new or is cancelled; whatever follows it is not recorded.
	t.Cleanup(func() { _ = r.c.TerminateWorkflow(context.Background(), id, "", "history recorded") })
	return run
}

func dispatcherScenarios() []scenario {
	// Rounds: a full batch (maintenance first), a partial one then a wake-up, an empty
	// claim then the tick, a failed delivery then the tick, an empty claim, then
	// continue-as-new after RoundsPerRun. The claims and deliveries run as local
	// activities (markers), maintenance as regular ones.
	rounds := newDispatchStandIn(2, 1, 0, 1, 0)
	rounds.deliverFailsAt = 2
	waiting := newDispatchStandIn(1)
	waiting.maintainFails = true
	delivering := newDispatchStandIn(2)
	delivering.deliverBlocksAt = 0
	// A claim whose local attempts all fail, then the round after the short wait.
	claimFails := newDispatchStandIn(1)
	claimFails.claimFails = 3
	topology := &topologyStandIn{}
	return []scenario{
		{name: "dispatcher_rounds_continue_as_new", activities: rounds,
			want:      []enumspb.EventType{marker, signaled, timerCancel, timerFired, continued},
			scheduled: map[string]int{"MaintainDispatchQueue": 3, "ClaimBatch": 5, "DeliverBatch": 3},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				run := startDispatcher(t, r, workflows.DispatcherInput{
					PollInterval: 3 * time.Second, BatchSize: 2, ProcessingTimeout: time.Minute, RoundsPerRun: 5})
				waitForEvents(t, r.c, run, timerStart, 1)
				require.NoError(t, r.c.SignalWorkflow(context.Background(), run.GetID(), run.GetRunID(), workflows.WakeSignal, nil))
				return run
			}},
		{name: "dispatcher_claim_failed", activities: claimFails, want: []enumspb.EventType{marker, timerFired, continued},
			scheduled: map[string]int{"ClaimBatch": 2, "DeliverBatch": 1},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				return startDispatcher(t, r, workflows.DispatcherInput{PollInterval: 8 * time.Second, BatchSize: 2, RoundsPerRun: 2})
			}},
		{name: "dispatcher_cancelled_waiting", activities: waiting, want: []enumspb.EventType{actFailed, cancelAsked, canceled},
			scheduled: map[string]int{"DeliverBatch": 1},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				run := startDispatcher(t, r, workflows.DispatcherInput{PollInterval: 30 * time.Second, BatchSize: 10})
				waitForEvents(t, r.c, run, timerStart, 1)
				require.NoError(t, r.c.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
				return run
			}},
		{name: "dispatcher_cancelled_delivering", activities: delivering, want: []enumspb.EventType{cancelAsked, canceled},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				t.Cleanup(func() { close(delivering.release) })
				run := startDispatcher(t, r, workflows.DispatcherInput{PollInterval: 30 * time.Second, BatchSize: 10})
				cancelWhenBlocked(t, r, run, delivering.blocked)
				return run
			}},
		{name: "topology_declared", activities: topology, want: []enumspb.EventType{completed},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				return startWorkflow(t, r, workflows.TopologyWorkflowID("replay-"+uuid.NewString()[:8]),
					temporal.SearchAttributes{}, workflows.TopologyWorkflowType)
			}},
	}
}
