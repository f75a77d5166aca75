package activities

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
)

// temporalPayloadLimit is Temporal's limit on one payload.
const temporalPayloadLimit = 2 << 20

// payloadSize is the encoded size of v as the workflow's history stores it.
func payloadSize(t *testing.T, v any) int {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p.Size()
}

// At the largest batch a claim may take, with the longest target names and error texts,
// the claim's result, the delivery's input and its result each stay under half of
// Temporal's payload limit.
func TestDispatchPayloadsAtMaxBatch(t *testing.T) {
	longName := strings.Repeat("t", 128)
	longError := strings.Repeat("é", 4000)
	claimed := make([]domain.ClaimedRequest, activityio.MaxClaimBatch)
	refs := make([]domain.ClaimRef, activityio.MaxClaimBatch)
	outcomes := make([]domain.DeliveryOutcome, activityio.MaxClaimBatch)
	now := time.Now()
	for i := range claimed {
		id := uuid.Must(uuid.NewV7())
		claimed[i] = domain.ClaimedRequest{ID: id, Epoch: 1 << 40, Target: longName, Priority: "normal", Attempts: 9, CreatedAt: now}
		refs[i] = domain.ClaimRef{ID: id, Epoch: 1 << 40}
		cmd := uuid.Must(uuid.NewV7())
		outcome := domain.OutcomeRetry
		if i%2 == 0 {
			outcome = domain.OutcomeDispatched
		}
		outcomes[i] = domain.DeliveryOutcome{RequestID: id, Outcome: outcome, CommandID: &cmd, Error: longError, NextAttemptAt: &now,
			Queued: time.Hour, Command: &domain.DispatchedCommand{ID: cmd, Target: longName, Mode: "listen", Priority: "normal", AssignedInstanceID: &cmd}}
	}

	claim := payloadSize(t, activityio.ClaimBatchResult{Claimed: claimed, Lost: 3})
	deliverIn := payloadSize(t, activityio.DeliverBatchInput{ReplicaID: longName, Requests: refs})
	delivered := summarizeDelivery(outcomes)
	deliverOut := payloadSize(t, delivered)
	t.Logf("payloads at batch_size %d: claim result %d B, deliver input %d B, deliver result %d B (limit %d B)",
		activityio.MaxClaimBatch, claim, deliverIn, deliverOut, temporalPayloadLimit)
	for name, size := range map[string]int{"claim result": claim, "deliver input": deliverIn, "deliver result": deliverOut} {
		require.Less(t, size, temporalPayloadLimit/2, name)
	}
	require.Equal(t, activityio.MaxClaimBatch/2, delivered.Dispatched, "the counts cover every request")
	require.Equal(t, activityio.MaxClaimBatch/2, delivered.Retried)
	require.Len(t, delivered.Outcomes, maxReportedOutcomes)

	// What the workflow reads of a claim survives the trip: id and epoch.
	p, err := converter.GetDefaultDataConverter().ToPayload(activityio.ClaimBatchResult{Claimed: claimed[:2], Lost: 3})
	require.NoError(t, err)
	var back activityio.ClaimBatchResult
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &back))
	require.Equal(t, 3, back.Lost)
	require.Equal(t, []domain.ClaimedRequest{{ID: claimed[0].ID, Epoch: claimed[0].Epoch}, {ID: claimed[1].ID, Epoch: claimed[1].Epoch}}, back.Claimed)
}
