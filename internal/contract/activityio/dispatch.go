package activityio

import (
	"encoding/json"

	"github.com/google/uuid"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// ClaimBatchInput asks for up to Limit pending requests for a replica.
type ClaimBatchInput struct {
	ReplicaID string `json:"replica_id"`
	Limit     int    `json:"limit"`
}

// MaxClaimBatch is the most requests one claim takes, whatever dispatch.batch_size
// says: at this size the claim's result, the delivery's input and its result each stay
// well under Temporal's 2 MB payload limit (see TestDispatchPayloadsAtMaxBatch).
const MaxClaimBatch = 10000

// ClaimBatchResult lists the requests won, by id and epoch, and how many were lost to
// other replicas. Only the id and epoch of each request reach the workflow's history
// (see MarshalJSON).
type ClaimBatchResult struct {
	Claimed []domain.ClaimedRequest `json:"claimed"`
	Lost    int                     `json:"lost"`
}

// MarshalJSON encodes each claimed request as its id and epoch, all the workflow
// reads: the target name (up to 128 bytes), priority, attempts and creation time would
// more than double the payload of a full batch.
func (r ClaimBatchResult) MarshalJSON() ([]byte, error) {
	refs := make([]domain.ClaimRef, len(r.Claimed))
	for i, c := range r.Claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	return json.Marshal(struct {
		Claimed []domain.ClaimRef `json:"claimed"`
		Lost    int               `json:"lost"`
	}{refs, r.Lost})
}

// DeliverBatchInput names the claimed requests to deliver with the epochs they were
// claimed at.
type DeliverBatchInput struct {
	ReplicaID string            `json:"replica_id"`
	Requests  []domain.ClaimRef `json:"requests"`
}

// DeliverBatchResult counts the outcomes of a delivery and lists up to 100 of those
// that were not dispatched (retried, failed, expired or stale), so that its size does
// not grow with the batch.
type DeliverBatchResult struct {
	Outcomes   []domain.DeliveryOutcome `json:"outcomes"`
	Dispatched int                      `json:"dispatched"`
	Retried    int                      `json:"retried"`
	Failed     int                      `json:"failed"`
	Expired    int                      `json:"expired"`
	Stale      int                      `json:"stale"`
}

// MaintainDispatchQueueInput names the replica running the maintenance.
type MaintainDispatchQueueInput struct {
	ReplicaID string `json:"replica_id"`
}

// MaintainDispatchQueueResult lists what the maintenance changed.
type MaintainDispatchQueueResult struct {
	Reclaimed []domain.ReclaimedRequest `json:"reclaimed,omitempty"`
	Expired   []uuid.UUID               `json:"expired,omitempty"`
	Requeued  []domain.RedispatchResult `json:"requeued,omitempty"`
	// Stranded are deployments failed because their workflow never started.
	Stranded []uuid.UUID `json:"stranded,omitempty"`
}
