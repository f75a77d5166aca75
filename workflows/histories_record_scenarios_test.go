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
