package schema

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// The views a read of deployments fills are the API's own types (internal/contract/api): one
// definition of each shape, which the HTTP API serves as it is.
type (
	// DeploymentView is a deployment with, when read alone, its spec and its steps.
	DeploymentView = api.Deployment
	// StepView is a step with its per-target results.
	StepView = api.Step
	// StepCounts counts a step's targets by state.
	StepCounts = api.StepCounts
	// TargetView is one target's result in a step.
	TargetView = api.TargetResult
	// AnalysisView is the analysis of a failed command.
	AnalysisView = api.Analysis
)

// GetDeployment returns a deployment with its steps and per-target results, or
// ErrNotFound.
func GetDeployment(ctx context.Context, db DB, id uuid.UUID) (DeploymentView, error) {
	r, err := queries.DeploymentByID(ctx, db, id)
	if err != nil {
		return DeploymentView{}, notFound(err)
	}
	d := DeploymentView{
		ID: r.ID, Name: r.Name, Priority: r.Priority, Status: r.Status, IdempotencyKey: r.IdempotencyKey,
		CreatedBy: r.CreatedBy, Error: r.Error, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		Spec: r.Spec,
	}
	if d.Waiting, err = DeploymentWaitingFor(ctx, db, id); err != nil {
		return DeploymentView{}, err
	}
	if err := withLink(ctx, db, &d); err != nil {
		return DeploymentView{}, err
	}
	steps, err := queries.StepsOfDeployment(ctx, db, id)
	if err != nil {
		return DeploymentView{}, fmt.Errorf("reading steps: %w", err)
	}
	for _, s := range steps {
		d.Steps = append(d.Steps, StepView{
			Position: int(s.Position), Name: s.Name, Command: s.Command, Status: s.Status,
			ContinueOnError: s.ContinueOnError, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Targets: []TargetView{},
		})
	}
	targets, err := queries.TargetResultsOfDeployment(ctx, db, dbsqlc.TargetResultsOfDeploymentParams{
		DeploymentID: id, TailBytes: OutputTailBytes,
	})
	if err != nil {
		return DeploymentView{}, fmt.Errorf("reading target results: %w", err)
	}
	for _, t := range targets {
		if t.StepPosition == nil || *t.StepPosition < 0 || int(*t.StepPosition) >= len(d.Steps) {
			continue
		}
		addTarget(&d.Steps[*t.StepPosition], targetView(t))
	}
	return d, nil
}

// targetView is a target's result as the API shows it.
func targetView(r dbsqlc.TargetResultsOfDeploymentRow) TargetView {
	tv := TargetView{
		Target: r.Target, Status: targetStatus(r.RequestStatus, r.CommandStatus), ExitCode: intPtr(r.ExitCode),
		OutputTail: safetext.DisplayTail(r.OutputTail, OutputTailBytes), Truncated: r.Truncated, Error: r.Error,
		Attempts: int(r.Attempts), StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
	}
	if r.AnalysisStatus != nil {
		tv.Analysis = &AnalysisView{Status: *r.AnalysisStatus, Category: r.Category, Summary: r.Summary, Suggestion: r.Suggestion}
	}
	return tv
}

// addTarget appends a target's result to the step and counts it.
func addTarget(s *StepView, tv TargetView) {
	s.Targets = append(s.Targets, tv)
	switch tv.Status {
	case TargetQueued:
		s.Counts.Queued++
	case TargetRunning:
		s.Counts.Running++
	case TargetSucceeded:
		s.Counts.Succeeded++
	default:
		s.Counts.Failed++
	}
}

// A target's state in a step, as the API shows it: its request's and its command's
// states folded into one.
const (
	TargetQueued    = "queued"
	TargetRunning   = "running"
	TargetSucceeded = "succeeded"
	TargetFailed    = "failed"
)

// targetStatus folds a request's and its command's states into one target state.
func targetStatus(req string, cmd *string) string {
	switch req {
	case domain.StatusFailed, domain.StatusExpired, domain.StatusCancelled:
		return TargetFailed
	case domain.StatusPending, domain.StatusProcessing:
		return TargetQueued
	}
	if cmd == nil {
		return TargetQueued
	}
	switch *cmd {
	case domain.CommandQueued:
		return TargetQueued
	case domain.CommandRunning:
		return TargetRunning
	case domain.CommandSucceeded:
		return TargetSucceeded
	}
	return TargetFailed
}

// DeploymentFilter selects deployments to list.
type DeploymentFilter struct {
	Statuses []string
	Name     string
	Limit    int
	Before   *uuid.UUID
}

// Bounds on how many deployments ListDeployments returns.
const (
	defaultDeploymentsListed = 50
	maxDeploymentsListed     = 500
)

// ListDeployments returns deployments newest first, without steps.
func ListDeployments(ctx context.Context, db DB, f DeploymentFilter) ([]DeploymentView, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultDeploymentsListed
	}
	rows, err := queries.ListDeployments(ctx, db, dbsqlc.ListDeploymentsParams{
		Statuses: f.Statuses, Name: f.Name, Before: f.Before, MaxRows: int32(min(limit, maxDeploymentsListed)),
	})
	if err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	out := make([]DeploymentView, len(rows))
	for i, r := range rows {
		out[i] = DeploymentView{
			ID: r.ID, Name: r.Name, Priority: r.Priority, Status: r.Status, IdempotencyKey: r.IdempotencyKey,
			CreatedBy: r.CreatedBy, Error: r.Error, CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		}
	}
	return out, nil
}
