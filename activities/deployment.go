package activities

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/schema"
)

// ResultsChannel is the notification channel of deployment results, named in schema
// where the trigger of migration 004 is checked against it.
const ResultsChannel = schema.DeploymentResultsChannel

// StartDeployment validates the spec, records the deployment (idempotently: a
// deployment created by the API is found, one started from a Temporal client is
// created), resolves its targets and marks it running.
func (a *Activities) StartDeployment(ctx context.Context, in activityio.StartDeploymentInput) (activityio.StartDeploymentResult, error) {
	s := in.Spec.WithDefaults()
	if err := s.Validate(); err != nil {
		return activityio.StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activityio.InvalidSpec, nil)
	}
	id, err := activityio.DeploymentIDFor(in.WorkflowID, s)
	if err != nil {
		return activityio.StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activityio.InvalidSpec, nil)
	}
	// The API seals a spec's secrets before it starts the workflow; a spec started
	// straight from a Temporal client is sealed here, before it is stored.
	sealed, err := in.Spec.SealSecrets(secretenv.Sealer(a.Secrets, id.String()))
	if err != nil {
		return activityio.StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activityio.InvalidSpec, nil)
	}
	raw, err := json.Marshal(sealed)
	if err != nil {
		return activityio.StartDeploymentResult{}, err
	}
	if _, _, err := schema.CreateDeployment(ctx, a.DB, schema.NewDeployment{
		ID: id, Name: s.Name, Priority: s.Priority, Spec: raw, IdempotencyKey: s.IdempotencyKey, MaxParallel: s.MaxParallel,
	}); err != nil {
		return activityio.StartDeploymentResult{}, err
	}
	targets, err := schema.ResolveTargets(ctx, a.DB, s.Targets, s.TargetSelector)
	if err == nil {
		err = a.resolveVerifyHosts(ctx, s)
	}
	var inputErr *domain.InputError
	if errors.As(err, &inputErr) {
		_, _ = schema.FinishDeployment(ctx, a.DB, id, domain.DeploymentFailed, inputErr.Error())
		return activityio.StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(inputErr.Error(), activityio.InvalidSpec, nil)
	}
	if err != nil {
		return activityio.StartDeploymentResult{}, err
	}
	if err := a.refuseFrozen(ctx, id, targets); err != nil {
		return activityio.StartDeploymentResult{}, err
	}
	// The rollback and verify steps are recorded after the spec's steps, so that they
	// run and show like any step.
	recorded := s.RecordedSteps()
	steps := make([]schema.StepRecord, len(recorded))
	for i, st := range recorded {
		steps[i] = schema.StepRecord{Name: st.Name, Command: st.Command, Timeout: st.Timeout, ContinueOnError: st.ContinueOnError}
	}
	if err := schema.StartDeployment(ctx, a.DB, id, steps, targets); err != nil {
		if errors.Is(err, schema.ErrDeploymentEnded) {
			return activityio.StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), activityio.DeploymentEnded, nil)
		}
		return activityio.StartDeploymentResult{}, err
	}
	a.Metrics.deploymentStarted()
	if in.CountOnly {
		// The recorded list, which a retry after a first committed attempt keeps.
		n, err := schema.DeploymentTargetCount(ctx, a.DB, id)
		if err != nil {
			return activityio.StartDeploymentResult{}, err
		}
		return activityio.StartDeploymentResult{DeploymentID: id.String(), TargetCount: n}, nil
	}
	return activityio.StartDeploymentResult{DeploymentID: id.String(), Targets: targets, TargetCount: len(targets)}, nil
}

// deploymentID parses an input's deployment id; a bad one is not retried.
func deploymentID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, temporal.NewNonRetryableApplicationError("deployment_id: must be a UUID", activityio.InvalidSpec, err)
	}
	return id, nil
}

// StartStep marks a step running.
func (a *Activities) StartStep(ctx context.Context, in activityio.StartStepInput) error {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return err
	}
	if err := schema.StartStep(ctx, a.DB, id, in.Position, in.Targets); err != nil {
		return err
	}
	a.Metrics.stepStarted(in.Targets)
	return nil
}

// resultCoalesce is how long AdvanceStep lingers after a result notification so that
// results landing together are counted once.
const resultCoalesce = 50 * time.Millisecond

// FinishStep records a step's end.
func (a *Activities) FinishStep(ctx context.Context, in activityio.FinishStepInput) error {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return err
	}
	return schema.FinishStep(ctx, a.DB, id, in.Position, in.Status, schema.StepTally{
		Succeeded: in.Succeeded, Failed: in.Failed, Skipped: in.Skipped,
	})
}

// FinishDeployment records the deployment's end and returns its final state (a
// deployment already failed by a dead Thorax stays failed).
//
// Runs from before the "struct-activity-io" change schedule it; newer runs
// schedule EndDeployment.
func (a *Activities) FinishDeployment(ctx context.Context, in activityio.FinishDeploymentInput) (string, error) {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return "", err
	}
	final, err := schema.FinishDeployment(ctx, a.DB, id, in.Status, in.Reason)
	if err != nil {
		return "", err
	}
	a.Metrics.deploymentFinished(ctx, a.DB, id, final)
	return final, nil
}

// CancelDeploymentWork cancels what a cancelled deployment has not finished.
//
// Runs from before the "struct-activity-io" change schedule it; newer runs
// schedule CancelDeployment.
func (a *Activities) CancelDeploymentWork(ctx context.Context, deployment string) (int, error) {
	id, err := deploymentID(deployment)
	if err != nil {
		return 0, err
	}
	return schema.CancelDeploymentWork(ctx, a.DB, id)
}

// waitForResults is how an activity waits on a deployment's results: wake fires on
// each result notification (nil without notifications), deadline after maxWait (30 s
// when unset). Call stop when done.
func (a *Activities) waitForResults(deployment uuid.UUID, maxWait time.Duration) (wake <-chan struct{}, deadline *time.Timer, stop func()) {
	if maxWait <= 0 {
		maxWait = 30 * time.Second
	}
	closeSub := func() {}
	if a.Notifications != nil {
		sub := a.Notifications.Subscribe(ResultsChannel, deployment.String())
		wake, closeSub = sub.C, sub.Close
	}
	deadline = time.NewTimer(maxWait)
	return wake, deadline, func() { deadline.Stop(); closeSub() }
}
