package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// DeploymentResult is how a deployment ended.
type DeploymentResult struct {
	DeploymentID string       `json:"deployment_id"`
	Status       string       `json:"status"`
	Steps        []StepResult `json:"steps"`
	// Rollback summarises the rollback steps, when the deployment failed and ran them.
	Rollback []StepResult `json:"rollback,omitempty"`
}

// StepResult summarises one step.
type StepResult struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped"`
	// FailedTargets names up to 20 targets the step failed on, with why.
	FailedTargets []domain.TargetResult `json:"failed_targets,omitempty"`
}

// windowInDatabaseChange is the workflow.GetVersion change id of the deployment that
// keeps each step's window on the database side and continues as new when its history
// grows. Every run records it: the branch for runs recorded before it is retired
// (testdata/histories/retired/v1), as no release ever started such a run.
const windowInDatabaseChange = "window-in-database"

// Versions of windowInDatabaseChange.
const deploymentWindowVersion workflow.Version = 1

// DeploymentInput is the Deployment workflow's input: a deployment spec in plain JSON,
// so that any Temporal client can start one, and, in a run continued as new, how far the
// deployment got.
type DeploymentInput struct {
	spec.Deployment
	// Progress is set by the run that continued as new; a client leaves it out.
	Progress *DeploymentProgress `json:"progress,omitempty"`
}

// DeploymentProgress is what a run hands the next when it continues as new. It stays
// small at any size: the targets are in the database, not here.
type DeploymentProgress struct {
	DeploymentID string `json:"deployment_id"`
	// Targets is how many targets the deployment runs on.
	Targets int `json:"targets"`
	// Step is the position of the step to run, or to go on with, next.
	Step int `json:"step"`
	// Steps summarises the steps that ended.
	Steps []StepResult `json:"steps,omitempty"`
	// Waiting is what the deployment waits for a person to decide, if anything.
	Waiting *Wait `json:"waiting,omitempty"`
	// Paused is set by a pause decision and cleared by resume; it takes effect
	// between steps.
	Paused bool `json:"paused,omitempty"`
	// Round is the retry round of the step at Step (0 before any retry).
	Round int `json:"round,omitempty"`
	// Batch is the rollout batch of the step at Step running now (0: the first), and
	// BatchOpened is set once the pause before it is over.
	Batch       int  `json:"batch,omitempty"`
	BatchOpened bool `json:"batch_opened,omitempty"`
}

// Deployment runs a deployment's steps in order. Its input is the plain JSON spec, so
// any Temporal client can start one:
//
//	temporal workflow start --type Deployment --task-queue mantis-deployments --input '<spec>'
//
// Each step runs on every target, at most max_parallel at a time: the AdvanceStep
// activity keeps that window on the database side, so neither the targets nor their
// results pass through the history, and a step costs one activity call per few minutes
// whatever its size. A failed step stops the deployment unless continue_on_error. The
// run continues as new before its history grows past a small part of Temporal's limits.
// Cancelling the workflow cancels what has not finished and ends the deployment
// cancelled.
func Deployment(ctx workflow.Context, in DeploymentInput) (DeploymentResult, error) {
	// Every run since 0.1.0, the first release, records version 1 of this change. With
	// the oldest supported version raised to it, a history without the marker (recorded
	// by code older than any release) fails its workflow task with a clear error instead
	// of replaying code it was not recorded with. New runs still record the marker, so
	// that they replay on the build before this one too.
	workflow.GetVersion(ctx, windowInDatabaseChange, deploymentWindowVersion, deploymentWindowVersion)
	return windowedDeployment(ctx, in)
}

// deploymentRetry is the retry policy of every deployment activity: transient errors
// are retried with backoff, an invalid spec is not.
func deploymentRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        30 * time.Second,
		NonRetryableErrorTypes: []string{activityio.InvalidSpec},
	}
}
