package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// The stand-ins below are registered under the real activities' names (their method
// names) and return results of the real types. A workflow's history depends only on
// the workflow code and the activity results, so the histories they produce are the
// ones a real Mandible records for the same outcomes.

// blockUntilCancelled heartbeats until the activity is cancelled (the workflow was
// cancelled) or the recording ends, after telling the recorder it is blocked.
func blockUntilCancelled(ctx context.Context, blocked chan<- struct{}, release <-chan struct{}) error {
	select {
	case blocked <- struct{}{}:
	default:
	}
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return temporal.NewCanceledError("recording ended")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// deploymentStandIn plays the deployment activities for one scripted deployment.
type deploymentStandIn struct {
	targets []string
	// perAwait is how many results one AwaitStepResults returns (0: all waited for).
	perAwait int
	// emptyFirstAwait makes the first await of every step return nothing, as when
	// awaitMaxWait passes without a result.
	emptyFirstAwait bool
	// failing names "position/target" pairs whose command fails.
	failing map[string]bool
	// enqueueFailsAt is the step position whose enqueue fails with an invalid spec (-1: none).
	enqueueFailsAt int
	// blockAt is the step position whose await blocks until cancelled (-1: none).
	blockAt int
	blocked chan struct{}
	release chan struct{}

	mu     sync.Mutex
	awaits map[int]int
}

func newDeploymentStandIn(targets ...string) *deploymentStandIn {
	return &deploymentStandIn{
		targets: targets, failing: map[string]bool{}, enqueueFailsAt: -1, blockAt: -1,
		blocked: make(chan struct{}, 1), release: make(chan struct{}), awaits: map[int]int{},
	}
}

// StartDeployment stands in for activities.Activities.StartDeployment.
func (d *deploymentStandIn) StartDeployment(_ context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
	id, err := activityio.DeploymentIDFor(in.WorkflowID, in.Spec)
	if err != nil {
		return activityio.StartDeploymentResult{}, err
	}
	return activityio.StartDeploymentResult{DeploymentID: id.String(), Targets: d.targets}, nil
}

// StartStep stands in for activities.Activities.StartStep.
func (d *deploymentStandIn) StartStep(context.Context, activityio.StartStepInput) error { return nil }

// EnqueueStepTargets stands in for activities.Activities.EnqueueStepTargets.
func (d *deploymentStandIn) EnqueueStepTargets(_ context.Context, in activityio.EnqueueStepTargetsInput) error {
	if in.Position == d.enqueueFailsAt {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("step %d: working_dir must be absolute", in.Position), activityio.InvalidSpec, nil)
	}
	return nil
}

// AwaitStepResults stands in for activities.Activities.AwaitStepResults.
func (d *deploymentStandIn) AwaitStepResults(ctx context.Context, in activityio.AwaitStepResultsInput) (activityio.AwaitStepResultsResult, error) {
	if in.Position == d.blockAt {
		return activityio.AwaitStepResultsResult{}, blockUntilCancelled(ctx, d.blocked, d.release)
	}
	d.mu.Lock()
	call := d.awaits[in.Position]
	d.awaits[in.Position]++
	d.mu.Unlock()
	if d.emptyFirstAwait && call == 0 {
		return activityio.AwaitStepResultsResult{}, nil
	}
	n := len(in.Waiting)
	if d.perAwait > 0 {
		n = min(n, d.perAwait)
	}
	var res activityio.AwaitStepResultsResult
	for _, target := range in.Waiting[:n] {
		code := 0
		r := domain.TargetResult{Target: target, Status: "succeeded", ExitCode: &code}
		if d.failing[fmt.Sprintf("%d/%s", in.Position, target)] {
			code = 1
			r.Status, r.Error = "failed", "command exited with status 1"
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

// FinishStep stands in for activities.Activities.FinishStep.
func (d *deploymentStandIn) FinishStep(context.Context, activityio.FinishStepInput) error { return nil }

// FinishDeployment stands in for activities.Activities.FinishDeployment.
func (d *deploymentStandIn) FinishDeployment(_ context.Context, in activityio.FinishDeploymentInput) (string, error) {
	return in.Status, nil
}

// CancelDeploymentWork stands in for activities.Activities.CancelDeploymentWork.
func (d *deploymentStandIn) CancelDeploymentWork(context.Context, string) (int, error) {
	return len(d.targets), nil
}

// EndDeployment stands in for activities.Activities.EndDeployment.
func (d *deploymentStandIn) EndDeployment(_ context.Context, in activityio.FinishDeploymentInput) (activityio.EndDeploymentResult, error) {
	return activityio.EndDeploymentResult{Status: in.Status}, nil
}

// CancelDeployment stands in for activities.Activities.CancelDeployment.
func (d *deploymentStandIn) CancelDeployment(context.Context, activityio.CancelDeploymentInput) (activityio.CancelDeploymentResult, error) {
	return activityio.CancelDeploymentResult{Cancelled: len(d.targets)}, nil
}

// dispatchStandIn plays the dispatch activities for one scripted dispatcher run.
type dispatchStandIn struct {
	// claims is how many requests each ClaimBatch call wins, in order; then none.
	claims []int
	// deliverFailsAt is the DeliverBatch call (from 0) that fails (-1: none).
	deliverFailsAt int
	// deliverBlocksAt is the DeliverBatch call that blocks until cancelled (-1: none).
	deliverBlocksAt int
	// maintainFails makes every maintenance fail.
	maintainFails bool
	// claimFails is how many ClaimBatch calls fail first (a lost database connection).
	claimFails int
	blocked    chan struct{}
	release    chan struct{}

	mu       sync.Mutex
	claimN   int
	deliverN int
	epoch    int64
}

func newDispatchStandIn(claims ...int) *dispatchStandIn {
	return &dispatchStandIn{
		claims: claims, deliverFailsAt: -1, deliverBlocksAt: -1,
		blocked: make(chan struct{}, 1), release: make(chan struct{}),
	}
}

// ClaimBatch stands in for activities.Activities.ClaimBatch.
func (d *dispatchStandIn) ClaimBatch(_ context.Context, in activityio.ClaimBatchInput) (activityio.ClaimBatchResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.claimFails > 0 {
		d.claimFails--
		return activityio.ClaimBatchResult{}, errors.New("claiming dispatch requests: connection refused")
	}
	n := 0
	if d.claimN < len(d.claims) {
		n = min(d.claims[d.claimN], in.Limit)
	}
	d.claimN++
	res := activityio.ClaimBatchResult{Claimed: []domain.ClaimedRequest{}}
	for i := range n {
		d.epoch++
		res.Claimed = append(res.Claimed, domain.ClaimedRequest{
			ID: uuid.New(), Epoch: d.epoch, Target: fmt.Sprintf("web-%02d", i+1), Priority: "normal",
			CreatedAt: time.Now().UTC().Add(-time.Second),
		})
	}
	return res, nil
}

// DeliverBatch stands in for activities.Activities.DeliverBatch.
func (d *dispatchStandIn) DeliverBatch(ctx context.Context, in activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error) {
	d.mu.Lock()
	call := d.deliverN
	d.deliverN++
	d.mu.Unlock()
	switch call {
	case d.deliverBlocksAt:
		return activityio.DeliverBatchResult{}, blockUntilCancelled(ctx, d.blocked, d.release)
	case d.deliverFailsAt:
		return activityio.DeliverBatchResult{}, temporal.NewNonRetryableApplicationError(
			"deliver input: replica_id required", activityio.InvalidInput, nil)
	}
	res := activityio.DeliverBatchResult{}
	for _, r := range in.Requests {
		cmd := uuid.New()
		res.Outcomes = append(res.Outcomes, domain.DeliveryOutcome{
			RequestID: r.ID, Outcome: domain.OutcomeDispatched, CommandID: &cmd, Queued: 40 * time.Millisecond,
		})
		res.Dispatched++
	}
	return res, nil
}

// MaintainDispatchQueue stands in for activities.Activities.MaintainDispatchQueue.
func (d *dispatchStandIn) MaintainDispatchQueue(context.Context, activityio.MaintainDispatchQueueInput) (activityio.MaintainDispatchQueueResult, error) {
	if d.maintainFails {
		// Retried by the workflow's policy (3 attempts), then logged.
		return activityio.MaintainDispatchQueueResult{}, errors.New("reclaiming orphans: connection refused")
	}
	return activityio.MaintainDispatchQueueResult{
		Reclaimed: []domain.ReclaimedRequest{{ID: uuid.New(), OldHolder: "mandible-gone", NewEpoch: 2}},
		Expired:   []uuid.UUID{uuid.New()},
	}, nil
}

// topologyStandIn plays the topology declaration.
type topologyStandIn struct{}

// DeclareTopology stands in for activities.Activities.DeclareTopology.
func (*topologyStandIn) DeclareTopology(context.Context) (activityio.DeclareTopologyResult, error) {
	return activityio.DeclareTopologyResult{
		Exchanges: []string{"mantis.commands", "mantis.analysis", "mantis.dlx"},
		Queues: []string{"mantis.commands.priority.high", "mantis.commands.priority.normal",
			"mantis.commands.priority.low", "mantis.analysis.requests", "mantis.dlq"},
		Bindings: 8,
	}, nil
}
