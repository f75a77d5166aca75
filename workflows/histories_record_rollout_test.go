package workflows_test

import (
	"context"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// rolloutStandIn plays AdvanceStep within a step's window: a batch end that leaves
// targets out answers BatchDone, and the targets failing names, by step position, the
// target ordinals whose command fails.
type rolloutStandIn struct {
	*windowStandIn
	failing map[int]map[int]bool
	touched int
}

func newRolloutStandIn(targets int, failing map[int]map[int]bool) *rolloutStandIn {
	return &rolloutStandIn{windowStandIn: newWindowStandIn(targets), failing: failing}
}

// AdvanceStep stands in for activities.Activities.AdvanceStep.
func (r *rolloutStandIn) AdvanceStep(_ context.Context, in activityio.AdvanceStepInput) (activityio.AdvanceStepResult, error) {
	w := in.Window
	total := w.Total(r.targets)
	end := total
	if w.BatchEnd > 0 {
		end = min(w.BatchEnd, total)
	}
	p := domain.StepProgress{Total: total, Enqueued: end, Skipped: total - end}
	for i := range end {
		if r.failing[in.Position][i] {
			p.Failed++
		}
	}
	p.Succeeded = end - p.Failed
	r.mu.Lock()
	r.touched = max(r.touched, end)
	r.mu.Unlock()
	stopped := p.Failed > 0 && w.FailureRoom == nil || w.FailureRoom != nil && p.Failed > *w.FailureRoom
	if !stopped && end < total {
		p.BatchDone = true
		return p, nil
	}
	p.Done, p.Status = true, domain.StepSucceeded
	if p.Failed > 0 {
		p.Status = domain.StepFailed
		p.FailedTargets = []domain.TargetResult{{Target: "web-02", Status: domain.CommandFailed}}
	}
	return p, nil
}

// TouchedTargets stands in for activities.Activities.TouchedTargets.
func (r *rolloutStandIn) TouchedTargets(context.Context, activityio.TouchedTargetsInput) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.touched, nil
}

// CountTouchedTargets stands in for activities.Activities.CountTouchedTargets.
func (r *rolloutStandIn) CountTouchedTargets(ctx context.Context, in activityio.TouchedTargetsInput) (activityio.CountTouchedTargetsResult, error) {
	n, err := r.TouchedTargets(ctx, in)
	return activityio.CountTouchedTargetsResult{Targets: n}, err
}

// rolloutScenarios are the rollout paths: a fleet-wide budget spent in a later
// batch of the second step, a canary failing its health gate and the rollback that
// follows, and a step whose batches each wait for an approval.
func rolloutScenarios() []windowScenario {
	ten := []string{"web-01", "web-02", "web-03", "web-04", "web-05", "web-06", "web-07", "web-08", "web-09", "web-10"}
	one := 1
	budget := newRolloutStandIn(10, map[int]map[int]bool{0: {9: true}, 1: {3: true, 4: true}})
	canary := newRolloutStandIn(10, map[int]map[int]bool{2: {1: true}})
	approved := newRolloutStandIn(3, nil)
	return []windowScenario{
		{runs: 1, lastWant: []enumspb.EventType{failed}, scenario: scenario{
			name: "deployment_rollout_budget_spent", activities: budget,
			want:      []enumspb.EventType{failed, enumspb.EVENT_TYPE_TIMER_STARTED},
			scheduled: map[string]int{"AdvanceStep": 5, activityio.EndDeployment: 1},
			run: runDeployment(spec.Deployment{Name: "rolling release", Targets: ten, Steps: steps("fetch", "restart"),
				Rollout: &spec.Rollout{Batches: []spec.BatchSize{{Count: 2}, {Count: 5}}, PauseBetween: "1s", MaxFailures: &one}})}},
		{runs: 1, lastWant: []enumspb.EventType{failed}, scenario: scenario{
			name: "deployment_rollout_canary_rolled_back", activities: canary,
			want:      []enumspb.EventType{failed},
			scheduled: map[string]int{"AdvanceStep": 3, activityio.CountTouchedTargets: 1, "FinishStep": 1, "SkipSteps": 1},
			run: runDeployment(spec.Deployment{Name: "canary release", Targets: ten, Steps: steps("install"),
				Rollout:   &spec.Rollout{Batches: []spec.BatchSize{{Count: 2}, {Percent: 50}}, Canary: &spec.Canary{Verify: "./healthy.sh"}},
				OnFailure: []spec.Step{{Name: "restore", Command: "./rollback.sh", Timeout: "2m"}}})}},
		{runs: 1, lastWant: []enumspb.EventType{completed}, scenario: scenario{
			name: "deployment_rollout_approved_batches", activities: approved,
			want:      []enumspb.EventType{completed, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED},
			scheduled: map[string]int{"AdvanceStep": 3, "SetWaiting": 2, "RecordDecision": 2},
			run: func(t *testing.T, r recorder) client.WorkflowRun {
				run := runDeployment(spec.Deployment{Name: "approved release", Targets: ten[:3], Steps: steps("migrate"),
					Rollout: &spec.Rollout{Batches: []spec.BatchSize{{Count: 1}}, PauseBetween: spec.PauseApproval}})(t, r)
				sendDecision(t, r, run, api.DecisionApprove)
				sendDecision(t, r, run, api.DecisionApprove)
				return run
			}}},
	}
}
