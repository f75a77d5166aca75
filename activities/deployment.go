package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/schema"
)

// DeploymentWorkflowIDPrefix prefixes the workflow id of a deployment started by
// Mandible, "deployment:<uuid>" (workflows.DeploymentWorkflowID).
const DeploymentWorkflowIDPrefix = "deployment:"

// ResultsChannel is the notification channel of deployment results, named in schema
// where the trigger of migration 004 is checked against it.
const ResultsChannel = schema.DeploymentResultsChannel

// deploymentNamespace derives deployment ids from workflow ids that are not
// "deployment:<uuid>" (deployments started straight from a Temporal client).
var deploymentNamespace = uuid.MustParse("6d616e74-6973-4000-8000-6465706c6f79")

// DeploymentIDFor returns the deployment id of a workflow: the spec's when set, the
// uuid in a "deployment:<uuid>" workflow id, or one derived from the workflow id.
func DeploymentIDFor(workflowID string, s spec.Deployment) (uuid.UUID, error) {
	if s.DeploymentID != "" {
		id, err := uuid.Parse(s.DeploymentID)
		if err != nil {
			return uuid.Nil, fmt.Errorf("deployment_id: must be a UUID, got %q", s.DeploymentID)
		}
		return id, nil
	}
	if rest, ok := strings.CutPrefix(workflowID, DeploymentWorkflowIDPrefix); ok {
		if id, err := uuid.Parse(rest); err == nil {
			return id, nil
		}
	}
	return uuid.NewSHA1(deploymentNamespace, []byte(workflowID)), nil
}

// StartDeploymentInput is the spec and the workflow running it.
type StartDeploymentInput struct {
	WorkflowID string          `json:"workflow_id"`
	Spec       spec.Deployment `json:"spec"`
	// CountOnly leaves the target names out of the result: the workflow keeps each
	// step's window on the database side and needs only how many there are.
	CountOnly bool `json:"count_only,omitempty"`
}

// StartDeploymentResult names the deployment and counts the targets it runs on. Targets
// lists them, unless the input asked for the count only.
type StartDeploymentResult struct {
	DeploymentID string   `json:"deployment_id"`
	Targets      []string `json:"targets"`
	TargetCount  int      `json:"target_count,omitempty"`
}

// StartDeployment validates the spec, records the deployment (idempotently: a
// deployment created by the API is found, one started from a Temporal client is
// created), resolves its targets and marks it running.
func (a *Activities) StartDeployment(ctx context.Context, in StartDeploymentInput) (StartDeploymentResult, error) {
	s := in.Spec.WithDefaults()
	if err := s.Validate(); err != nil {
		return StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), InvalidSpec, nil)
	}
	id, err := DeploymentIDFor(in.WorkflowID, s)
	if err != nil {
		return StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), InvalidSpec, nil)
	}
	// The API seals a spec's secrets before it starts the workflow; a spec started
	// straight from a Temporal client is sealed here, before it is stored.
	sealed, err := in.Spec.SealSecrets(secretenv.Sealer(a.Secrets, id.String()))
	if err != nil {
		return StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), InvalidSpec, nil)
	}
	raw, err := json.Marshal(sealed)
	if err != nil {
		return StartDeploymentResult{}, err
	}
	if _, _, err := schema.CreateDeployment(ctx, a.DB, schema.NewDeployment{
		ID: id, Name: s.Name, Priority: s.Priority, Spec: raw, IdempotencyKey: s.IdempotencyKey, MaxParallel: s.MaxParallel,
	}); err != nil {
		return StartDeploymentResult{}, err
	}
	targets, err := schema.ResolveTargets(ctx, a.DB, s.Targets, s.TargetSelector)
	if err == nil {
		err = a.resolveVerifyHosts(ctx, s)
	}
	var inputErr *schema.InputError
	if errors.As(err, &inputErr) {
		_, _ = schema.FinishDeployment(ctx, a.DB, id, domain.DeploymentFailed, inputErr.Error())
		return StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(inputErr.Error(), InvalidSpec, nil)
	}
	if err != nil {
		return StartDeploymentResult{}, err
	}
	if err := a.refuseFrozen(ctx, id, targets); err != nil {
		return StartDeploymentResult{}, err
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
			return StartDeploymentResult{}, temporal.NewNonRetryableApplicationError(err.Error(), DeploymentEnded, nil)
		}
		return StartDeploymentResult{}, err
	}
	a.Metrics.deploymentStarted()
	if in.CountOnly {
		// The recorded list, which a retry after a first committed attempt keeps.
		n, err := schema.DeploymentTargetCount(ctx, a.DB, id)
		if err != nil {
			return StartDeploymentResult{}, err
		}
		return StartDeploymentResult{DeploymentID: id.String(), TargetCount: n}, nil
	}
	return StartDeploymentResult{DeploymentID: id.String(), Targets: targets, TargetCount: len(targets)}, nil
}

// StepInput names a step of a deployment.
type StepInput struct {
	DeploymentID string `json:"deployment_id"`
	Position     int    `json:"position"`
}

func (in StepInput) id() (uuid.UUID, error) {
	id, err := uuid.Parse(in.DeploymentID)
	if err != nil {
		return uuid.Nil, temporal.NewNonRetryableApplicationError("deployment_id: must be a UUID", InvalidSpec, err)
	}
	return id, nil
}

// StartStepInput starts a step.
type StartStepInput struct {
	StepInput
	Targets int `json:"targets"`
}

// StartStep marks a step running.
func (a *Activities) StartStep(ctx context.Context, in StartStepInput) error {
	id, err := in.id()
	if err != nil {
		return err
	}
	if err := schema.StartStep(ctx, a.DB, id, in.Position, in.Targets); err != nil {
		return err
	}
	a.Metrics.stepStarted(in.Targets)
	return nil
}

// EnqueueStepTargetsInput is a step's command for some of its targets.
type EnqueueStepTargetsInput struct {
	StepInput
	Priority string    `json:"priority"`
	Step     spec.Step `json:"step"`
	Targets  []string  `json:"targets"`
}

// EnqueueStepTargets enqueues the step's dispatch requests for the targets in one
// statement (idempotent).
func (a *Activities) EnqueueStepTargets(ctx context.Context, in EnqueueStepTargetsInput) error {
	id, err := in.id()
	if err != nil {
		return err
	}
	// A spec started straight from a Temporal client may carry its secrets unsealed.
	sealed, err := spec.Deployment{Steps: []spec.Step{in.Step}}.SealSecrets(secretenv.Sealer(a.Secrets, id.String()))
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), InvalidSpec, nil)
	}
	step := sealed.Steps[0]
	err = schema.EnqueueStepTargets(ctx, a.DB, id, in.Position, in.Priority, schema.NewStepCommand{
		Command: step.Command, Timeout: step.TimeoutDuration(), Env: step.CommandEnv(), WorkingDir: step.WorkingDir,
	}, in.Targets)
	var inputErr *schema.InputError
	if errors.As(err, &inputErr) {
		return temporal.NewNonRetryableApplicationError(inputErr.Error(), InvalidSpec, nil)
	}
	return err
}

// AwaitStepResultsInput names the targets of a step still waited for.
type AwaitStepResultsInput struct {
	StepInput
	Waiting []string `json:"waiting"`
	// MaxWait bounds the call; an empty answer means nothing ended meanwhile.
	MaxWait time.Duration `json:"max_wait"`
}

// AwaitStepResultsResult lists the targets whose step ended.
type AwaitStepResultsResult struct {
	Results []domain.TargetResult `json:"results"`
}

// resultCoalesce is how long a waiter lingers after a first result so that results
// arriving together reach the workflow as one batch.
const resultCoalesce = 50 * time.Millisecond

// AwaitStepResults waits, on the database, until at least one waited-for target's
// step has ended, and returns every one that has: results reach the workflow in
// batches, so a 1,000-target step costs a handful of history events per batch.
func (a *Activities) AwaitStepResults(ctx context.Context, in AwaitStepResultsInput) (AwaitStepResultsResult, error) {
	id, err := in.id()
	if err != nil {
		return AwaitStepResultsResult{}, err
	}
	wake, deadline, stop := a.waitForResults(id, in.MaxWait)
	defer stop()
	for {
		results, err := schema.StepResults(ctx, a.DB, id, in.Position, in.Waiting)
		if err != nil {
			return AwaitStepResultsResult{}, err
		}
		if len(results) > 0 {
			if len(results) < len(in.Waiting) {
				select {
				case <-time.After(resultCoalesce):
					if more, err := schema.StepResults(ctx, a.DB, id, in.Position, in.Waiting); err == nil {
						results = more
					}
				case <-ctx.Done():
				}
			}
			return AwaitStepResultsResult{Results: results}, nil
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return AwaitStepResultsResult{}, ctx.Err()
		case <-deadline.C:
			return AwaitStepResultsResult{}, nil
		case <-wake:
		case <-time.After(2 * time.Second):
			// A fallback re-read: a notification can be missed across a reconnect.
		}
	}
}

// FinishStepInput ends a step.
type FinishStepInput struct {
	StepInput
	Status    string `json:"status"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped,omitempty"`
}

// FinishStep records a step's end.
func (a *Activities) FinishStep(ctx context.Context, in FinishStepInput) error {
	id, err := in.id()
	if err != nil {
		return err
	}
	return schema.FinishStep(ctx, a.DB, id, in.Position, in.Status, schema.StepTally{
		Succeeded: in.Succeeded, Failed: in.Failed, Skipped: in.Skipped,
	})
}

// FinishDeploymentInput ends a deployment.
type FinishDeploymentInput struct {
	DeploymentID string `json:"deployment_id"`
	Status       string `json:"status"`
	Reason       string `json:"reason,omitempty"`
}

// FinishDeployment records the deployment's end and returns its final state (a
// deployment already failed by a dead Thorax stays failed).
func (a *Activities) FinishDeployment(ctx context.Context, in FinishDeploymentInput) (string, error) {
	id, err := StepInput{DeploymentID: in.DeploymentID}.id()
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
func (a *Activities) CancelDeploymentWork(ctx context.Context, deploymentID string) (int, error) {
	id, err := StepInput{DeploymentID: deploymentID}.id()
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
