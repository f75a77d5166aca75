package activityio

import (
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// RecordDecisionInput is a person's decision (or an approval's timeout) the
// Deployment workflow took, to record.
type RecordDecisionInput struct {
	DeploymentID string    `json:"deployment_id"`
	Decision     string    `json:"decision"`
	By           string    `json:"by"`
	Comment      string    `json:"comment,omitempty"`
	Step         *int      `json:"step,omitempty"`
	At           time.Time `json:"at"`
	// UpdateID is the Temporal Update that carried the decision: a retried call
	// records it once.
	UpdateID string `json:"update_id"`
}

// SetWaitingInput is what a deployment now waits for a person to decide; nil Waiting
// clears it.
type SetWaitingInput struct {
	DeploymentID string              `json:"deployment_id"`
	Waiting      *events.WaitingData `json:"waiting,omitempty"`
}

// RetryStepInput names a failed step to run again on its failed targets, as retry
// round Round (1 for the first retry).
type RetryStepInput struct {
	StepInput
	Round int `json:"round"`
}
