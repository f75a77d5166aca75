package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// DeploymentView is a deployment as the API shows it.
type DeploymentView struct {
	ID             uuid.UUID `json:"id"`
	Name           string    `json:"name"`
	Priority       string    `json:"priority"`
	Status         string    `json:"status"`
	IdempotencyKey *string   `json:"idempotency_key,omitempty"`
	// CreatedBy names the API token that created the deployment.
	CreatedBy  *string         `json:"created_by,omitempty"`
	Error      *string         `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Steps      []StepView      `json:"steps,omitempty"`
}

// StepView is a step with its per-target results.
type StepView struct {
	Position        int          `json:"position"`
	Name            string       `json:"name"`
	Command         string       `json:"command"`
	Status          string       `json:"status"`
	ContinueOnError bool         `json:"continue_on_error"`
	StartedAt       *time.Time   `json:"started_at,omitempty"`
	FinishedAt      *time.Time   `json:"finished_at,omitempty"`
	Targets         []TargetView `json:"targets"`
	Counts          StepCounts   `json:"counts"`
}

// StepCounts counts a step's targets by state.
type StepCounts struct {
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
}

// TargetView is one target's result in a step.
type TargetView struct {
	Target   string `json:"target"`
	Status   string `json:"status"` // TargetQueued, TargetRunning, TargetSucceeded or TargetFailed
	ExitCode *int   `json:"exit_code,omitempty"`
	// OutputTail is the display text of the output's last OutputTailBytes bytes:
	// valid UTF-8 without NUL, escape sequences kept.
	OutputTail string        `json:"output_tail,omitempty"`
	Truncated  bool          `json:"output_truncated,omitempty"`
	Error      string        `json:"error,omitempty"`
	Attempts   int           `json:"attempts"`
	StartedAt  *time.Time    `json:"started_at,omitempty"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
	Analysis   *AnalysisView `json:"analysis,omitempty"`
}

// AnalysisView is the analysis of a failed command.
type AnalysisView struct {
	Status     string  `json:"status"`
	Category   *string `json:"category,omitempty"`
	Summary    *string `json:"summary,omitempty"`
	Suggestion *string `json:"suggestion,omitempty"`
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
		d.Steps[*t.StepPosition].add(targetView(t))
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

// add appends a target's result to the step and counts it.
func (s *StepView) add(tv TargetView) {
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
	case StatusFailed, StatusExpired, StatusCancelled:
		return TargetFailed
	case StatusPending, StatusProcessing:
		return TargetQueued
	}
	if cmd == nil {
		return TargetQueued
	}
	switch *cmd {
	case CommandQueued:
		return TargetQueued
	case CommandRunning:
		return TargetRunning
	case CommandSucceeded:
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
