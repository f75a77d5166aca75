package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema"
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

// RecordDecision stores a decision in deployment_decisions with its event, and clears
// what the deployment waited for (schema.RecordDecision).
func (a *Activities) RecordDecision(ctx context.Context, in RecordDecisionInput) (api.Decision, error) {
	id, err := StepInput{DeploymentID: in.DeploymentID}.id()
	if err != nil {
		return api.Decision{}, err
	}
	return schema.RecordDecision(ctx, a.DB, schema.NewDecision{
		DeploymentID: id, Decision: in.Decision, By: in.By, Comment: in.Comment, Step: in.Step, At: in.At, UpdateID: in.UpdateID,
	})
}

// SetWaitingInput is what a deployment now waits for a person to decide; nil Waiting
// clears it.
type SetWaitingInput struct {
	DeploymentID string              `json:"deployment_id"`
	Waiting      *events.WaitingData `json:"waiting,omitempty"`
}

// SetWaiting records what a deployment waits for, with a deployment.waiting event
// (schema.SetWaiting), for the API's deployment view and SSE clients.
func (a *Activities) SetWaiting(ctx context.Context, in SetWaitingInput) error {
	id, err := StepInput{DeploymentID: in.DeploymentID}.id()
	if err != nil {
		return err
	}
	return schema.SetWaiting(ctx, a.DB, id, in.Waiting)
}

// RetryStepInput names a failed step to run again on its failed targets, as retry
// round Round (1 for the first retry).
type RetryStepInput struct {
	StepInput
	Round int `json:"round"`
}

// RetryStep sets the step running again: the requests of its failed targets are
// superseded, and the next AdvanceStep enqueues those targets as new requests
// (schema.RetryStep). It returns how many targets run again.
func (a *Activities) RetryStep(ctx context.Context, in RetryStepInput) (int, error) {
	id, err := in.id()
	if err != nil {
		return 0, err
	}
	if in.Round < 1 {
		return 0, temporal.NewNonRetryableApplicationError("round: must be 1 or more", InvalidSpec, nil)
	}
	n, err := schema.RetryStep(ctx, a.DB, id, in.Position, in.Round)
	var inputErr *schema.InputError
	if errors.As(err, &inputErr) {
		return 0, temporal.NewNonRetryableApplicationError(inputErr.Error(), InvalidSpec, nil)
	}
	return n, err
}
