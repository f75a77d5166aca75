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
