package api

import (
	"time"

	"github.com/google/uuid"
)

// NewDispatchRequest is one request of POST /api/v1/dispatch-requests.
type NewDispatchRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
	Target         string `json:"target"`
	Command        string `json:"command"`
	Priority       string `json:"priority"`
	// Timeout is a Go duration ("90s"), at most spec.MaxStepTimeout (24 h); empty
	// means ten minutes.
	Timeout string `json:"timeout"`
}

// EnqueueBody is the body of POST /api/v1/dispatch-requests.
type EnqueueBody struct {
	Requests []NewDispatchRequest `json:"requests"`
}

// EnqueueAnswer is the answer to POST /api/v1/dispatch-requests, one entry per
// request in order.
type EnqueueAnswer struct {
	Requests []EnqueuedRequest `json:"requests"`
}

// EnqueuedRequest is the stored request of one enqueue: Created is false when the
// key already named a request.
type EnqueuedRequest struct {
	ID             uuid.UUID `json:"id"`
	IdempotencyKey string    `json:"idempotency_key"`
	Created        bool      `json:"created"`
	ExpiresAt      time.Time `json:"expires_at"`
}

// DispatchRequestList is the answer to GET /api/v1/dispatch-requests: newest first,
// with the URL of the next page when the page is full.
type DispatchRequestList struct {
	Requests []DispatchRequest `json:"requests"`
	Next     string            `json:"next,omitempty"`
}

// DispatchRequest is a request as operators inspect it, with a plain reason for its
// state.
type DispatchRequest struct {
	ID             uuid.UUID  `json:"id"`
	IdempotencyKey string     `json:"idempotency_key"`
	Target         string     `json:"target"`
	DeploymentID   *uuid.UUID `json:"deployment_id,omitempty"`
	StepPosition   *int       `json:"step_position,omitempty"`
	Command        string     `json:"command"`
	Priority       string     `json:"priority"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	MaxAttempts    int        `json:"max_attempts"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	NextAttemptAt  time.Time  `json:"next_attempt_at"`
	ClaimedBy      *string    `json:"claimed_by,omitempty"`
	ClaimedAt      *time.Time `json:"claimed_at,omitempty"`
	ClaimEpoch     int64      `json:"claim_epoch"`
	DispatchedAt   *time.Time `json:"dispatched_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	LastError      *string    `json:"last_error,omitempty"`
	CommandID      *uuid.UUID `json:"command_id,omitempty"`
	CommandStatus  *string    `json:"command_status,omitempty"`
	// HeldBy names the concurrency limit (api.Limit) holding a pending request back,
	// when one is reached.
	HeldBy string `json:"held_by,omitempty"`
	// Reason says in plain words why the request is in its state.
	Reason string `json:"reason"`
}
