package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/safetext"
)

// Human decisions reach a Deployment as Temporal Updates named after the decision
// (api.Decision*), sent to the workflow id so they reach the current run; the query
// ProgressQuery answers where the deployment stands.
const (
	// ProgressQuery is the query that returns a DeploymentProgressView.
	ProgressQuery = "progress"
	// DecisionNotExpected is the error type of an Update the deployment does not wait
	// for now (the API answers 409).
	DecisionNotExpected = "DecisionNotExpected"
	// DecisionNotApprover is the error type of an Update from a token the step's
	// approvers do not name (the API answers 403).
	DecisionNotApprover = "DecisionNotApprover"
	// DecisionSelfApproval is the error type of an approve from the deployment's
	// own author on a step that does not allow it (the API answers 403).
	DecisionSelfApproval = "DecisionSelfApproval"
	// DecisionInvalid is the error type of an Update whose input is malformed.
	DecisionInvalid = "DecisionInvalid"
	// maxDeciderName bounds an Update's "by", an API token's name.
	maxDeciderName = 64
)

// humanDecisionsChange is the workflow.GetVersion change id of the paths that wait for
// a person: an approval step, a failed step that asks, and a pause.
const humanDecisionsChange = "human-decisions"

// Versions of humanDecisionsChange.
const humanDecisionsVersion workflow.Version = 1

// DecisionInput is every decision Update's argument: the deciding API token's name
// and a comment. Author is set by the API when By is the token that created the
// deployment, so that an approval step refuses the author's approve.
type DecisionInput struct {
	By      string `json:"by"`
	Comment string `json:"comment,omitempty"`
	Author  bool   `json:"author,omitempty"`
}

// Wait is what a deployment waits for a person to decide, carried in
// DeploymentProgress across runs.
type Wait struct {
	Kind      string     `json:"kind"`
	Step      int        `json:"step"`
	Approvers []string   `json:"approvers,omitempty"`
	Since     time.Time  `json:"since"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// Batch is the rollout batch (1-based) an approval between batches would start.
	Batch int `json:"batch,omitempty"`
}

// DeploymentProgressView is the answer of ProgressQuery: the counts of every step
// that ended, of the step running now, and what the deployment waits for.
type DeploymentProgressView struct {
	DeploymentID string       `json:"deployment_id"`
	Targets      int          `json:"targets"`
	Step         int          `json:"step"`
	Steps        []StepResult `json:"steps"`
	Current      *StepResult  `json:"current,omitempty"`
	Waiting      *Wait        `json:"waiting,omitempty"`
	Paused       bool         `json:"paused"`
	RetryRound   int          `json:"retry_round,omitempty"`
}

// deciding is a run's state of human decisions: the progress it shares with the main
// loop, the spec's steps, and the decision taken but not yet acted on.
type deciding struct {
	p     *DeploymentProgress
	steps []spec.Step
	spec  spec.Deployment
	// cancelPastRoom is set while a rollout step whose budget cancels runs: its
	// window returns as soon as the failures pass the budget.
	cancelPastRoom bool
	outcome        *api.Decision
	// current is the running step's latest counts, for the progress query.
	current *StepResult
	// ended is set once the deployment is ending: no decision fits any more.
	ended bool
	// waited is set once this run recorded a wait, which its end then clears.
	waited bool
	// midStep is set while the run goes on with a step an earlier run started (it
	// continues as new only inside a step): a pause waits for the step's end.
	midStep bool
}

// registerDecisions installs the decision Updates and the progress query. Neither
// schedules anything until an Update arrives, so runs recorded before them replay.
func registerDecisions(ctx workflow.Context, d *deciding) error {
	for _, name := range api.DecisionNames {
		err := workflow.SetUpdateHandlerWithOptions(ctx, name,
			func(ctx workflow.Context, in DecisionInput) (api.Decision, error) { return d.decide(ctx, name, in) },
			workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, in DecisionInput) error { return d.validate(name, in) }})
		if err != nil {
			return fmt.Errorf("registering the %s update: %w", name, err)
		}
	}
	return workflow.SetQueryHandler(ctx, ProgressQuery, func() (DeploymentProgressView, error) {
		return DeploymentProgressView{DeploymentID: d.p.DeploymentID, Targets: d.p.Targets, Step: d.p.Step,
			Steps: append([]StepResult{}, d.p.Steps...), Current: d.current, Waiting: d.p.Waiting, Paused: d.p.Paused,
			RetryRound: d.p.Round}, nil
	})
}

// validate refuses a decision that is malformed, that the deployment does not wait
// for now, or whose token the waiting step's approvers do not name.
func (d *deciding) validate(name string, in DecisionInput) error {
	if in.By == "" || len(in.By) > maxDeciderName {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("by: the deciding token's name is required, at most %d bytes", maxDeciderName), DecisionInvalid, nil)
	}
	if problem := safetext.Unstorable(in.Comment, api.MaxDecisionComment); problem != "" {
		return temporal.NewNonRetryableApplicationError("comment: "+problem, DecisionInvalid, nil)
	}
	if why := d.notExpected(name); why != "" {
		return temporal.NewNonRetryableApplicationError(why, DecisionNotExpected, nil)
	}
	if w := d.p.Waiting; w != nil && w.Kind != events.WaitPaused && len(w.Approvers) > 0 && !slices.Contains(w.Approvers, in.By) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%q is not among the approvers of step %d (%v)", in.By, w.Step, w.Approvers), DecisionNotApprover, nil)
	}
	if name == api.DecisionApprove && in.Author && !d.allowsSelfApproval() {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%q created this deployment and may not approve it: step %d does not set allow_self_approval", in.By, d.p.Waiting.Step), DecisionSelfApproval, nil)
	}
	return nil
}

// allowsSelfApproval reports whether the step waiting for an approval lets the
// deployment's author approve it. A validator records nothing in the history (a
// refused Update leaves no event), so this check needs no workflow version.
func (d *deciding) allowsSelfApproval() bool {
	w := d.p.Waiting
	if w == nil || w.Step < 0 || w.Step >= len(d.steps) {
		return false
	}
	return d.steps[w.Step].AllowSelfApproval
}

// notExpected says why the deployment does not wait for decision now, or "" when it
// does.
func (d *deciding) notExpected(decision string) string {
	w := d.p.Waiting
	kind := ""
	if w != nil {
		kind = w.Kind
	}
	switch {
	case d.ended:
		return "the deployment has ended"
	case d.p.DeploymentID == "":
		return "the deployment is starting"
	case decision == api.DecisionApprove || decision == api.DecisionReject:
		if kind != events.WaitApproval {
			return fmt.Sprintf("%s: the deployment is not waiting for an approval (%s)", decision, d.describe())
		}
	case decision == api.DecisionRetry || decision == api.DecisionSkip || decision == api.DecisionAbort:
		if kind != events.WaitOnFailure {
			return fmt.Sprintf("%s: no failed step is waiting for a decision (%s)", decision, d.describe())
		}
	case decision == api.DecisionPause:
		if d.p.Paused {
			return "pause: the deployment is paused already"
		}
		if w != nil {
			return fmt.Sprintf("pause: the deployment is waiting for a decision (%s)", d.describe())
		}
	case decision == api.DecisionResume:
		if !d.p.Paused {
			return "resume: the deployment is not paused"
		}
	default:
		return fmt.Sprintf("%q is not a decision", decision)
	}
	return ""
}

// describe says what the deployment waits for now, for refusals.
func (d *deciding) describe() string {
	switch {
	case d.p.Waiting != nil:
		return fmt.Sprintf("it waits for %s at step %d", d.p.Waiting.Kind, d.p.Waiting.Step)
	case d.p.Paused:
		return "it is paused, effective between steps"
	default:
		return fmt.Sprintf("it is running step %d", d.p.Step)
	}
}

// decide applies a validated decision to the run's state at once, so that a
// decision arriving next is validated against it, then records it.
func (d *deciding) decide(ctx workflow.Context, decision string, in DecisionInput) (api.Decision, error) {
	step := d.p.Step
	if d.p.Waiting != nil {
		step = d.p.Waiting.Step
	}
	rec := api.Decision{Decision: decision, By: in.By, At: workflow.Now(ctx).UTC(), Step: &step, Comment: in.Comment}
	switch decision {
	case api.DecisionPause:
		d.p.Paused = true
	case api.DecisionResume:
		d.p.Paused, d.p.Waiting = false, nil
	default:
		d.p.Waiting, d.outcome = nil, &rec
	}
	return d.record(ctx, rec, workflow.GetCurrentUpdateInfo(ctx).ID)
}

// record stores a decision through the RecordDecision activity; updateID keeps a
// retried call from recording it twice.
func (d *deciding) record(ctx workflow.Context, rec api.Decision, updateID string) (api.Decision, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: deploymentRetry(),
		Summary: fmt.Sprintf("record %s by %s", rec.Decision, rec.By)})
	var stored api.Decision
	err := workflow.ExecuteActivity(actx, activityio.RecordDecision, activityio.RecordDecisionInput{
		DeploymentID: d.p.DeploymentID, Decision: rec.Decision, By: rec.By, Comment: rec.Comment, Step: rec.Step,
		At: rec.At, UpdateID: updateID,
	}).Get(ctx, &stored)
	if err != nil {
		return rec, err
	}
	return stored, nil
}
