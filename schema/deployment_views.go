package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// DeploymentView is a deployment with, when read alone, its spec and its steps.
type DeploymentView struct {
	ID             uuid.UUID
	Name           string
	Priority       string
	Status         string
	IdempotencyKey *string
	// CreatedBy names the API token that created the deployment.
	CreatedBy  *string
	Error      *string
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	Spec       json.RawMessage
	Steps      []StepView
	// Waiting is set while the deployment waits for a person's decision.
	Waiting *Waiting
	// PreviousDeploymentID, Relation and FromStep are set on a deployment made from
	// another one (DeploymentLink).
	PreviousDeploymentID *uuid.UUID
	Relation             *string
	FromStep             *int
}

// StepView is a step with its per-target results.
type StepView struct {
	Position        int
	Name            string
	Command         string
	Status          string
	ContinueOnError bool
	StartedAt       *time.Time
	FinishedAt      *time.Time
	Targets         []TargetView
	Counts          StepCounts
}

// StepCounts counts a step's targets by state.
type StepCounts struct {
	Queued    int
	Running   int
	Succeeded int
	Failed    int
}

// TargetView is one target's result in a step.
type TargetView struct {
	Target   string
	Status   string // TargetQueued, TargetRunning, TargetSucceeded or TargetFailed
	ExitCode *int
	// OutputTail is the display text of the output's tail: valid UTF-8 without NUL,
	// escape sequences kept.
	OutputTail string
	Truncated  bool
	Error      string
	Attempts   int
	StartedAt  *time.Time
	FinishedAt *time.Time
	Analysis   *AnalysisView
}

// AnalysisView is the analysis of a failed command.
type AnalysisView struct {
	Status     string
	Category   *string
	Summary    *string
	Suggestion *string
}

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

// targetView is a target's result in its step.
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
