package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Delivery outcomes of one claimed request.
const (
	// OutcomeDispatched: a command_queue row was written.
	OutcomeDispatched = "dispatched"
	// OutcomeRetry: the delivery failed; the request is pending again after a backoff.
	OutcomeRetry = "retry"
	// OutcomeFailed: the delivery failed and the budget is spent: it was the last of
	// MaxDispatchDeliveries (a first delivery and MaxDispatchRetries retries).
	OutcomeFailed = "failed"
	// OutcomeExpired: the request passed DispatchRequestTTL before delivery.
	OutcomeExpired = "expired"
	// OutcomeStale: the caller's epoch no longer holds the request (it was reclaimed);
	// the write was refused.
	OutcomeStale = "stale"
)

// outcomeOfStatus is the outcome a request's recorded status reports when a delivery
// is replayed.
var outcomeOfStatus = map[string]string{
	StatusDispatched: OutcomeDispatched, StatusPending: OutcomeRetry, StatusFailed: OutcomeFailed, StatusExpired: OutcomeExpired,
}

// ClaimRef names a claimed request and the epoch its holder claimed it with.
type ClaimRef struct {
	ID    uuid.UUID `json:"id"`
	Epoch int64     `json:"epoch"`
}

// DeliveryOutcome is what became of one claimed request.
type DeliveryOutcome struct {
	RequestID     uuid.UUID  `json:"request_id"`
	Outcome       string     `json:"outcome"`
	CommandID     *uuid.UUID `json:"command_id,omitempty"`
	Error         string     `json:"error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Queued is how long the request waited from creation to dispatch.
	Queued time.Duration `json:"queued_ns,omitempty"`
	// Command is the written command, for the broker nudge.
	Command *DispatchedCommand `json:"command,omitempty"`
}

// DispatchedCommand is the part of a written command_queue row a nudge carries.
type DispatchedCommand struct {
	ID                 uuid.UUID  `json:"id"`
	Target             string     `json:"target"`
	Mode               string     `json:"mode"`
	Priority           string     `json:"priority"`
	AssignedInstanceID *uuid.UUID `json:"assigned_instance_id,omitempty"`
	MaxRetries         int        `json:"max_retries"`
	// TraceParent is the W3C trace context the request was enqueued in, "" for none.
	TraceParent string `json:"trace_parent,omitempty"`
}

// DeliverOptions tunes DeliverClaimed.
type DeliverOptions struct {
	// HeartbeatTimeout is how recent a Thorax heartbeat must be for the instance to count
	// as live.
	HeartbeatTimeout time.Duration
}

// DeliverClaimed records the delivery of a claimed batch in one transaction: for each
// request still held by replica at its epoch, a command_queue row for its target (when a
// live Thorax serves the target), or a failed attempt with backoff (or failure once the
// budget is spent), or expiry. Writes are fenced by epoch: a request reclaimed since is
// reported stale and left alone. Replaying a batch returns the outcomes recorded the
// first time.
func DeliverClaimed(ctx context.Context, db TxBeginner, replica string, batch []ClaimRef, opts DeliverOptions) ([]DeliveryOutcome, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	var plan deliveryPlan
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		params := dbsqlc.LoadClaimedBatchParams{Replica: replica, HeartbeatTimeout: opts.HeartbeatTimeout,
			Ids: make([]uuid.UUID, len(batch)), Epochs: make([]int64, len(batch))}
		for i, c := range batch {
			params.Ids[i], params.Epochs[i] = c.ID, c.Epoch
		}
		rows, err := queries.LoadClaimedBatch(ctx, tx, params)
		if err != nil {
			return fmt.Errorf("loading claimed batch: %w", err)
		}
		loaded := make(map[uuid.UUID]dbsqlc.LoadClaimedBatchRow, len(rows))
		for _, r := range rows {
			loaded[r.ID] = r
		}
		for _, c := range batch {
			r, ok := loaded[c.ID]
			plan.add(c.ID, r, ok)
		}
		return plan.record(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("delivering batch: %w", err)
	}
	return plan.outcomes, nil
}

// deliveryPlan is a batch's outcomes and the writes that record them.
type deliveryPlan struct {
	outcomes []DeliveryOutcome
	writes   dbsqlc.RecordDeliveryOutcomesParams
}

// add decides the outcome of request id, loaded as r (ok false: not found).
func (p *deliveryPlan) add(id uuid.UUID, r dbsqlc.LoadClaimedBatchRow, ok bool) {
	out := DeliveryOutcome{RequestID: id}
	switch {
	case !ok || !r.Held:
		out.Outcome, out.Error = OutcomeStale, "claim epoch no longer holds the request: refused"
	case r.Status != StatusProcessing:
		// Recorded by an earlier run of this delivery: report it again.
		out.Outcome = outcomeOfStatus[r.Status]
		if r.ExistingCommandID != uuid.Nil { // the query reads a missing command as uuid.Nil
			cmd := r.ExistingCommandID
			out.CommandID = &cmd
		}
		if r.LastError != nil && out.Outcome != OutcomeDispatched {
			out.Error = *r.LastError
		}
		if out.Outcome == OutcomeRetry {
			t := r.NextAttemptAt
			out.NextAttemptAt = &t
		}
	case r.Expired:
		out.Outcome, out.Error = OutcomeExpired, expiredText+" before it could be dispatched"
		p.write(id, r.RowAt, StatusExpired, expiredText)
	case r.Deregistered || !r.Live:
		out.Error = fmt.Sprintf("no live Thorax for target %s", r.Target)
		if r.Deregistered {
			out.Error = fmt.Sprintf("target %s is deregistered", r.Target)
		}
		out.Outcome = OutcomeRetry
		status := StatusPending
		if int(r.Attempts)+1 >= MaxDispatchDeliveries {
			out.Outcome, status = OutcomeFailed, StatusFailed
		}
		p.write(id, r.RowAt, status, out.Error)
	default:
		cmd := uuid.Must(uuid.NewV7())
		out.Outcome, out.CommandID, out.Queued = OutcomeDispatched, &cmd, r.Queued
		// max_retries is the retries this delivery leaves: 0 on the last one, which
		// then skips the broker's free requeue too.
		retries := MaxDispatchRetries - int(r.Attempts)
		out.Command = &DispatchedCommand{ID: cmd, Target: r.Target, Mode: r.Mode, Priority: r.Priority,
			AssignedInstanceID: r.AssignedInstanceID, MaxRetries: retries, TraceParent: r.TraceParent}
		w := &p.writes
		w.CommandIds, w.CommandRows, w.CommandRetries = append(w.CommandIds, cmd), append(w.CommandRows, r.RowAt), append(w.CommandRetries, int32(retries))
		p.write(id, r.RowAt, StatusDispatched, "")
	}
	p.outcomes = append(p.outcomes, out)
}

// write moves request id, found at row (its address under the batch's lock), to status
// with lastError ("" clears it).
func (p *deliveryPlan) write(id uuid.UUID, row pgtype.TID, status, lastError string) {
	w := &p.writes
	w.RequestIds, w.RequestRows = append(w.RequestIds, id), append(w.RequestRows, row)
	w.Statuses, w.Errors = append(w.Statuses, status), append(w.Errors, lastError)
}

// record writes the plan in one statement and notes each retry's next attempt.
func (p *deliveryPlan) record(ctx context.Context, tx pgx.Tx) error {
	if len(p.writes.RequestIds) == 0 {
		return nil
	}
	rows, err := queries.RecordDeliveryOutcomes(ctx, tx, p.writes)
	if err != nil {
		return fmt.Errorf("recording batch outcomes: %w", err)
	}
	// Every written request is found at the address its lock keeps; should one not be,
	// the batch is refused whole (and its activity retried) rather than reported
	// dispatched without its command.
	if len(rows) != len(p.writes.RequestIds) {
		return fmt.Errorf("recording batch outcomes: %d of %d requests found where their lock holds them", len(rows), len(p.writes.RequestIds))
	}
	retryAt := make(map[uuid.UUID]time.Time, len(rows))
	for _, r := range rows {
		retryAt[r.ID] = r.NextAttemptAt
	}
	for i := range p.outcomes {
		if at, ok := retryAt[p.outcomes[i].RequestID]; ok && p.outcomes[i].Outcome == OutcomeRetry {
			p.outcomes[i].NextAttemptAt = &at
		}
	}
	return nil
}
