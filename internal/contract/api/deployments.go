package api

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Names of the links a deployment answer carries (Links maps them to URL paths).
const (
	LinkSelf     = "self"
	LinkCancel   = "cancel"
	LinkEvents   = "events"
	LinkTemporal = "temporal" // the Temporal Web UI page of its workflow, when configured
)

// Links maps link names (LinkSelf, ...) to URLs.
type Links map[string]string

// CreatedDeployment is the answer to POST /api/v1/deployments (202 when created,
// 200 when the idempotency key named an existing deployment).
type CreatedDeployment struct {
	ID      uuid.UUID `json:"id"`
	Status  string    `json:"status"`
	Created bool      `json:"created"`
	Links   Links     `json:"links"`
	// Warnings name what of the spec was accepted but may not do what its author
	// expects (a secret too short to be masked in output); absent when none.
	Warnings []FieldWarning `json:"warnings,omitempty"`
}

// FieldWarning names one field of an accepted request and what to know about it.
type FieldWarning struct {
	Field   string `json:"field"`
	Warning string `json:"warning"`
}

// DeploymentAnswer is the answer to GET /api/v1/deployments/{id}.
type DeploymentAnswer struct {
	Deployment Deployment `json:"deployment"`
	Links      Links      `json:"links"`
}

// DeploymentList is the answer to GET /api/v1/deployments: newest first, with the
// URL of the next page when the page is full.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
	Next        string       `json:"next,omitempty"`
}

// CancelAnswer is the answer to POST /api/v1/deployments/{id}/cancel.
type CancelAnswer struct {
	ID     uuid.UUID `json:"id"`
	Status string    `json:"status"`
	Links  Links     `json:"links"`
}

// StatusCancelling is CancelAnswer's status: the cancel was asked for.
const StatusCancelling = "cancelling"

// Deployment is a deployment with, when read alone, its spec and its steps.
type Deployment struct {
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
	Steps      []Step          `json:"steps,omitempty"`
	// Waiting is set while the deployment waits for a person's decision.
	Waiting *Waiting `json:"waiting,omitempty"`
	// PreviousDeploymentID, Relation and FromStep are set on a deployment made from
	// another one: Relation is RelationResume or RelationRerun, and FromStep is the
	// previous deployment's step (0-based) a resume starts from.
	PreviousDeploymentID *uuid.UUID `json:"previous_deployment_id,omitempty"`
	Relation             *string    `json:"relation,omitempty"`
	FromStep             *int       `json:"from_step,omitempty"`
}

// Step is a step with its per-target results.
type Step struct {
	Position        int            `json:"position"`
	Name            string         `json:"name"`
	Command         string         `json:"command"`
	Status          string         `json:"status"`
	ContinueOnError bool           `json:"continue_on_error"`
	StartedAt       *time.Time     `json:"started_at,omitempty"`
	FinishedAt      *time.Time     `json:"finished_at,omitempty"`
	Targets         []TargetResult `json:"targets"`
	Counts          StepCounts     `json:"counts"`
}

// StepCounts counts a step's targets by state.
type StepCounts struct {
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
}

// TargetResult is one target's result in a step.
type TargetResult struct {
	Target   string `json:"target"`
	Status   string `json:"status"` // queued, running, succeeded, failed
	ExitCode *int   `json:"exit_code,omitempty"`
	// OutputTail is the display text of the output's tail: valid UTF-8 without NUL,
	// escape sequences kept.
	OutputTail string     `json:"output_tail,omitempty"`
	Truncated  bool       `json:"output_truncated,omitempty"`
	Error      string     `json:"error,omitempty"`
	Attempts   int        `json:"attempts"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Analysis   *Analysis  `json:"analysis,omitempty"`
}

// Analysis is the analysis of a failed command.
type Analysis struct {
	Status     string  `json:"status"`
	Category   *string `json:"category,omitempty"`
	Summary    *string `json:"summary,omitempty"`
	Suggestion *string `json:"suggestion,omitempty"`
}
