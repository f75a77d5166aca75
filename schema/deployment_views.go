package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/safetext"
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
	Status   string `json:"status"` // queued, running, succeeded, failed
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
	var d DeploymentView
	err := db.QueryRow(ctx, `
		SELECT id, name, priority, status, idempotency_key, created_by, error, created_at, started_at, finished_at, spec
		FROM deployments WHERE id = $1`, id).
		Scan(&d.ID, &d.Name, &d.Priority, &d.Status, &d.IdempotencyKey, &d.CreatedBy, &d.Error, &d.CreatedAt, &d.StartedAt, &d.FinishedAt, &d.Spec)
	if err != nil {
		return DeploymentView{}, notFound(err)
	}
	rows, err := db.Query(ctx, `
		SELECT position, name, command, status, continue_on_error, started_at, finished_at
		FROM deployment_steps WHERE deployment_id = $1 ORDER BY position`, id)
	if err != nil {
		return DeploymentView{}, fmt.Errorf("reading steps: %w", err)
	}
	for rows.Next() {
		var s StepView
		if err := rows.Scan(&s.Position, &s.Name, &s.Command, &s.Status, &s.ContinueOnError, &s.StartedAt, &s.FinishedAt); err != nil {
			rows.Close()
			return DeploymentView{}, err
		}
		s.Targets = []TargetView{}
		d.Steps = append(d.Steps, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return DeploymentView{}, err
	}
	rows, err = db.Query(ctx, `
		SELECT p.step_position, t.name, p.status, c.status, c.exit_code, substring(c.output_raw FROM greatest(octet_length(c.output_raw) - $2 + 1, 1)),
		       coalesce(c.output_truncated, false) OR coalesce(octet_length(c.output_raw), 0) > $2,
		       coalesce(c.error, CASE WHEN p.status IN ('failed', 'expired', 'cancelled') THEN p.last_error END, ''),
		       p.attempts, c.started_at, c.finished_at, a.status, a.category, a.summary, a.suggestion
		FROM pending_dispatch_requests p
		JOIN targets t ON t.id = p.target_id
		LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
		LEFT JOIN analyses a ON a.command_id = c.id
		WHERE p.deployment_id = $1
		ORDER BY p.step_position, t.name`, id, OutputTailBytes)
	if err != nil {
		return DeploymentView{}, fmt.Errorf("reading target results: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			pos            int
			tv             TargetView
			reqStatus      string
			cmdStatus      *string
			analysisStatus *string
			av             AnalysisView
			rawTail        []byte
		)
		if err := rows.Scan(&pos, &tv.Target, &reqStatus, &cmdStatus, &tv.ExitCode, &rawTail, &tv.Truncated, &tv.Error,
			&tv.Attempts, &tv.StartedAt, &tv.FinishedAt, &analysisStatus, &av.Category, &av.Summary, &av.Suggestion); err != nil {
			return DeploymentView{}, err
		}
		tv.OutputTail = safetext.DisplayTail(rawTail, OutputTailBytes)
		tv.Status = targetStatus(reqStatus, cmdStatus)
		if analysisStatus != nil {
			av.Status = *analysisStatus
			tv.Analysis = &av
		}
		if pos < 0 || pos >= len(d.Steps) {
			continue
		}
		s := &d.Steps[pos]
		s.Targets = append(s.Targets, tv)
		switch tv.Status {
		case "queued":
			s.Counts.Queued++
		case "running":
			s.Counts.Running++
		case "succeeded":
			s.Counts.Succeeded++
		default:
			s.Counts.Failed++
		}
	}
	return d, rows.Err()
}

// targetStatus folds a request's and its command's states into one target state.
func targetStatus(req string, cmd *string) string {
	switch req {
	case StatusFailed, StatusExpired, "cancelled":
		return "failed"
	case StatusPending, StatusProcessing:
		return "queued"
	}
	if cmd == nil {
		return "queued"
	}
	switch *cmd {
	case "queued":
		return "queued"
	case "running":
		return "running"
	case "succeeded":
		return "succeeded"
	}
	return "failed"
}

// DeploymentFilter selects deployments to list.
type DeploymentFilter struct {
	Statuses []string
	Name     string
	Limit    int
	Before   *uuid.UUID
}

// ListDeployments returns deployments newest first, without steps.
func ListDeployments(ctx context.Context, db DB, f DeploymentFilter) ([]DeploymentView, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := db.Query(ctx, `
		SELECT id, name, priority, status, idempotency_key, created_by, error, created_at, started_at, finished_at
		FROM deployments
		WHERE (coalesce(cardinality($1::text[]), 0) = 0 OR status = ANY($1))
		  AND ($2 = '' OR name = $2)
		  AND ($3::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM deployments WHERE id = $3))
		ORDER BY created_at DESC, id DESC
		LIMIT $4`, f.Statuses, f.Name, f.Before, min(limit, 500))
	if err != nil {
		return nil, fmt.Errorf("listing deployments: %w", err)
	}
	defer rows.Close()
	out := []DeploymentView{}
	for rows.Next() {
		var d DeploymentView
		if err := rows.Scan(&d.ID, &d.Name, &d.Priority, &d.Status, &d.IdempotencyKey, &d.CreatedBy, &d.Error, &d.CreatedAt, &d.StartedAt, &d.FinishedAt); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
