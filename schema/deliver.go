package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// outcomeOfStatus is the outcome a request's recorded status reports when a delivery
// is replayed.
var outcomeOfStatus = map[string]string{
	domain.StatusDispatched: domain.OutcomeDispatched, domain.StatusPending: domain.OutcomeRetry, domain.StatusFailed: domain.OutcomeFailed, domain.StatusExpired: domain.OutcomeExpired,
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
func DeliverClaimed(ctx context.Context, db TxBeginner, replica string, batch []domain.ClaimRef, opts DeliverOptions) ([]domain.DeliveryOutcome, error) {
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
	outcomes []domain.DeliveryOutcome
	writes   dbsqlc.RecordDeliveryOutcomesParams
}

// add decides the outcome of request id, loaded as r (ok false: not found).
func (p *deliveryPlan) add(id uuid.UUID, r dbsqlc.LoadClaimedBatchRow, ok bool) {
	out := domain.DeliveryOutcome{RequestID: id}
	switch {
	case !ok || !r.Held:
		out.Outcome, out.Error = domain.OutcomeStale, "claim epoch no longer holds the request: refused"
	case r.Status != domain.StatusProcessing:
		// Recorded by an earlier run of this delivery: report it again.
		out.Outcome = outcomeOfStatus[r.Status]
		if r.ExistingCommandID != uuid.Nil { // the query reads a missing command as uuid.Nil
			cmd := r.ExistingCommandID
			out.CommandID = &cmd
		}
		if r.LastError != nil && out.Outcome != domain.OutcomeDispatched {
			out.Error = *r.LastError
		}
		if out.Outcome == domain.OutcomeRetry {
			t := r.NextAttemptAt
			out.NextAttemptAt = &t
		}
	case r.Expired:
		out.Outcome, out.Error = domain.OutcomeExpired, expiredText+" before it could be dispatched"
		p.write(id, r.RowAt, domain.StatusExpired, expiredText)
	case r.Deregistered || !r.Live:
		out.Error = fmt.Sprintf("no live Thorax for target %s", r.Target)
		if r.Deregistered {
			out.Error = fmt.Sprintf("target %s is deregistered", r.Target)
		}
		out.Outcome = domain.OutcomeRetry
		status := domain.StatusPending
		if int(r.Attempts)+1 >= domain.MaxDispatchDeliveries {
			out.Outcome, status = domain.OutcomeFailed, domain.StatusFailed
		}
		p.write(id, r.RowAt, status, out.Error)
	default:
		cmd := uuid.Must(uuid.NewV7())
		out.Outcome, out.CommandID, out.Queued = domain.OutcomeDispatched, &cmd, r.Queued
		// max_retries is the retries this delivery leaves: 0 on the last one, which
		// then skips the broker's free requeue too.
		retries := domain.MaxDispatchRetries - int(r.Attempts)
		out.Command = &domain.DispatchedCommand{ID: cmd, Target: r.Target, Mode: r.Mode, Priority: r.Priority,
			AssignedInstanceID: r.AssignedInstanceID, MaxRetries: retries, TraceParent: r.TraceParent}
		w := &p.writes
		w.CommandIds, w.CommandRows, w.CommandRetries = append(w.CommandIds, cmd), append(w.CommandRows, r.RowAt), append(w.CommandRetries, int32(retries))
		p.write(id, r.RowAt, domain.StatusDispatched, "")
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
		if at, ok := retryAt[p.outcomes[i].RequestID]; ok && p.outcomes[i].Outcome == domain.OutcomeRetry {
			p.outcomes[i].NextAttemptAt = &at
		}
	}
	return nil
}
