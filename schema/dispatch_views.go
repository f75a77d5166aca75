package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// DispatchRequestView is a dispatch request as operators inspect it, with a plain
// reason for its state.
type DispatchRequestView struct {
	ID             uuid.UUID
	IdempotencyKey string
	Target         string
	DeploymentID   *uuid.UUID
	StepPosition   *int
	Command        string
	Priority       string
	Status         string
	Attempts       int
	MaxAttempts    int
	CreatedAt      time.Time
	ExpiresAt      time.Time
	NextAttemptAt  time.Time
	ClaimedBy      *string
	ClaimedAt      *time.Time
	ClaimEpoch     int64
	DispatchedAt   *time.Time
	FinishedAt     *time.Time
	LastError      *string
	CommandID      *uuid.UUID
	CommandStatus  *string
	// HeldBy names the concurrency limit holding a pending request back, when one is
	// reached.
	HeldBy string
	// Reason says in plain words why the request is in its state.
	Reason string
}

// DispatchRequestFilter selects requests to list. Zero fields do not filter.
type DispatchRequestFilter struct {
	Statuses     []string
	Target       string
	DeploymentID *uuid.UUID
	// Limit caps the page (default 100, at most 1000).
	Limit int
	// Before pages backwards: requests created before this one.
	Before *uuid.UUID
	// ID selects one request.
	ID *uuid.UUID
}

// ListDispatchRequests returns requests newest first, each with the reason for its
// state. heartbeatTimeout decides which Thorax instances count as live.
func ListDispatchRequests(ctx context.Context, db DB, f DispatchRequestFilter, heartbeatTimeout time.Duration) ([]DispatchRequestView, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	rows, err := queries.ListDispatchRequests(ctx, db, dbsqlc.ListDispatchRequestsParams{
		HeartbeatTimeout: heartbeatTimeout, Statuses: f.Statuses, Target: f.Target,
		DeploymentID: f.DeploymentID, Before: f.Before, MaxRows: int32(limit), ID: f.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("listing dispatch requests: %w", err)
	}
	var out []DispatchRequestView
	for _, r := range rows {
		v := DispatchRequestView{
			ID: r.ID, IdempotencyKey: r.IdempotencyKey, Target: r.Target, DeploymentID: r.DeploymentID,
			StepPosition: stepPosition(r.StepPosition), Command: r.Command, Priority: r.Priority, Status: r.Status,
			Attempts: int(r.Attempts), MaxAttempts: domain.MaxDispatchDeliveries, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
			NextAttemptAt: r.NextAttemptAt, ClaimedBy: r.ClaimedBy, ClaimedAt: r.ClaimedAt, ClaimEpoch: r.ClaimEpoch,
			DispatchedAt: r.DispatchedAt, FinishedAt: r.FinishedAt, LastError: r.LastError, CommandID: r.CommandID,
			CommandStatus: r.CommandStatus, HeldBy: r.HeldBy,
		}
		v.Reason = dispatchReason(v, r.Deregistered, r.Live, r.Now)
		out = append(out, v)
	}
	return out, nil
}

// DispatchRequestByID returns one request with the reason for its state, or
// ErrNotFound.
func DispatchRequestByID(ctx context.Context, db DB, id uuid.UUID, heartbeatTimeout time.Duration) (DispatchRequestView, error) {
	views, err := ListDispatchRequests(ctx, db, DispatchRequestFilter{ID: &id, Limit: 1}, heartbeatTimeout)
	if err != nil {
		return DispatchRequestView{}, err
	}
	if len(views) == 0 {
		return DispatchRequestView{}, fmt.Errorf("reading dispatch request %s: %w", id, ErrNotFound)
	}
	return views[0], nil
}

// dispatchReason explains a request's state.
func dispatchReason(v DispatchRequestView, deregistered, live bool, now time.Time) string {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	lastErr := ""
	if v.LastError != nil {
		lastErr = *v.LastError
	}
	switch v.Status {
	case domain.StatusPending:
		switch {
		case v.ExpiresAt.Before(now):
			return fmt.Sprintf("past its expiry at %s; the next sweep marks it expired", ts(v.ExpiresAt))
		case v.NextAttemptAt.After(now):
			return fmt.Sprintf("waiting for backoff until %s (attempt %d of %d failed: %s)", ts(v.NextAttemptAt), v.Attempts, domain.MaxDispatchDeliveries, lastErr)
		case deregistered:
			return fmt.Sprintf("target %s is deregistered; delivery will fail", v.Target)
		case v.HeldBy != "":
			return fmt.Sprintf("held by concurrency limit %s, which is reached; claimed as soon as it allows (queued since %s, expires at %s)",
				v.HeldBy, ts(v.CreatedAt), ts(v.ExpiresAt))
		case !live:
			return fmt.Sprintf("no live Thorax for target %s; waiting for a replica to claim it (queued since %s)", v.Target, ts(v.CreatedAt))
		default:
			return fmt.Sprintf("waiting for a replica to claim it (queued since %s)", ts(v.CreatedAt))
		}
	case domain.StatusProcessing:
		holder, at := "", ""
		if v.ClaimedBy != nil {
			holder = *v.ClaimedBy
		}
		if v.ClaimedAt != nil {
			at = ts(*v.ClaimedAt)
		}
		return fmt.Sprintf("claimed by replica %s at %s (epoch %d), delivery in progress", holder, at, v.ClaimEpoch)
	case domain.StatusDispatched:
		cmd := "its command"
		if v.CommandID != nil {
			cmd = "command " + v.CommandID.String()
		}
		status := "unknown"
		if v.CommandStatus != nil {
			status = *v.CommandStatus
		}
		at := ""
		if v.DispatchedAt != nil {
			at = ts(*v.DispatchedAt)
		}
		return fmt.Sprintf("dispatched at %s as %s (%s)", at, cmd, status)
	case domain.StatusFailed:
		return fmt.Sprintf("failed after %d attempts: %s", v.Attempts, lastErr)
	case domain.StatusExpired:
		return fmt.Sprintf("expired at %s, %s after creation; never dispatched again", ts(v.ExpiresAt), domain.DispatchRequestTTLText)
	}
	return v.Status
}
