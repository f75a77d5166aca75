package workflows

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
)

func TestDispatcherLooksAgainSoonAfterClaimFailure(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	in := input(2)
	batch := requests(1, 1)
	var mu sync.Mutex
	attempts := 0
	dt.claim = func(int) (activityio.ClaimBatchResult, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts <= localAttempts {
			return activityio.ClaimBatchResult{}, errors.New("claiming dispatch requests: connection refused")
		}
		return activityio.ClaimBatchResult{Claimed: batch}, nil
	}

	requireContinuedAsNew(t, dt.run(in))

	// The first claim gives up after its attempts without ending the run; the next round
	// comes well before the tick and delivers what it claims.
	claims := dt.rec.times(claimActivity)
	require.Len(t, claims, 2)
	require.Less(t, claims[1], in.PollInterval, "a failed claim is retried before the tick")
	deliveries := dt.rec.of(deliverActivity)
	require.Len(t, deliveries, 1)
	require.Equal(t, refs(batch), deliveries[0].Input.(activityio.DeliverBatchInput).Requests)
	require.Len(t, dt.logs.find("claiming dispatch requests failed; looking again soon"), 1)
}

// TestDispatcherRunsBeforeLocalActivitiesKeepRegularOnes: a run started before the
// change (GetVersion answers the default version) claims and delivers with regular
// activities, retried until the processing timeout, as its history says.
func TestDispatcherRunsBeforeLocalActivitiesKeepRegularOnes(t *testing.T) {
	t.Parallel()
	dt := setup(t)
	dt.env.OnGetVersion(localDispatchChangeID, workflow.DefaultVersion, localDispatchVersion).Return(workflow.DefaultVersion)
	in := input(2)
	// Shorter than the retries the test environment allows (it caps attempts at 10), so
	// the processing timeout is what ends them.
	in.ProcessingTimeout = 20 * time.Second
	dt.claims = [][]domain.ClaimedRequest{requests(1, 2), requests(2, 1)}
	var mu sync.Mutex
	var attempts []time.Duration // workflow time of each attempt on the first batch
	dt.deliver = func(_ int, req activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.Requests[0].ID == dt.claims[0][0].ID {
			attempts = append(attempts, dt.env.Now().Sub(testStart))
		}
		return activityio.DeliverBatchResult{}, errors.New("writing command_queue: connection refused")
	}

	requireContinuedAsNew(t, dt.run(in))

	for _, s := range dt.rec.all() {
		require.False(t, s.Local, "%s is a regular activity in a run started before the change", s.Activity)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(attempts), localAttempts, "a regular delivery is retried until the processing timeout")
	require.Less(t, len(attempts), 10, "retries end at the processing timeout")
	require.LessOrEqual(t, attempts[len(attempts)-1], in.ProcessingTimeout)
	require.Equal(t, []time.Duration{0, in.PollInterval}, dt.rec.times(claimActivity))
	require.Len(t, dt.rec.of(deliverActivity), 2)
	require.Equal(t, in.ProcessingTimeout, dt.rec.of(deliverActivity)[0].Options.ScheduleToCloseTimeout)
}
