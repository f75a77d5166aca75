package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/spec"
)

// NewDeployment is a deployment to record.
type NewDeployment struct {
	ID             uuid.UUID
	Name           string
	Priority       string
	Spec           json.RawMessage
	IdempotencyKey string
	MaxParallel    int
	// CreatedBy names the API token that created it; empty for none.
	CreatedBy string
}

// CreateDeployment records a pending deployment. When its idempotency key or id
// already names a deployment, that one is returned with created = false.
func CreateDeployment(ctx context.Context, db DB, d NewDeployment) (id uuid.UUID, created bool, err error) {
	var key *string
	if d.IdempotencyKey != "" {
		key = &d.IdempotencyKey
	}
	var maxParallel *int
	if d.MaxParallel > 0 {
		maxParallel = &d.MaxParallel
	}
	err = db.QueryRow(ctx, `
		INSERT INTO deployments (id, name, priority, spec, idempotency_key, max_parallel, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, nullif($7, ''))
		ON CONFLICT DO NOTHING
		RETURNING id`, d.ID, d.Name, d.Priority, d.Spec, key, maxParallel, d.CreatedBy).Scan(&id)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, false, fmt.Errorf("creating deployment: %w", err)
	}
	err = db.QueryRow(ctx, `SELECT id FROM deployments WHERE id = $1 OR ($2::text IS NOT NULL AND idempotency_key = $2)
		ORDER BY id = $1 DESC LIMIT 1`, d.ID, key).Scan(&id)
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("reading existing deployment: %w", notFound(err))
	}
	return id, false, nil
}

// ResolveTargets returns the registered targets a deployment runs on: the named ones
// and those whose labels match every key=value of selector, sorted, without repeats.
// Unknown names, and more than spec.MaxTargets targets, are an *InputError.
func ResolveTargets(ctx context.Context, db DB, names []string, selector map[string]string) ([]string, error) {
	sel := selector
	if sel == nil {
		sel = map[string]string{}
	}
	selJSON, err := json.Marshal(sel)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
		SELECT name FROM targets
		WHERE deregistered_at IS NULL
		  AND (name = ANY($1) OR ($2::jsonb <> '{}'::jsonb AND labels @> $2::jsonb))
		ORDER BY name`, names, selJSON)
	if err != nil {
		return nil, fmt.Errorf("resolving targets: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("resolving targets: %w", err)
	}
	have := map[string]bool{}
	for _, n := range found {
		have[n] = true
	}
	var problems []string
	for i, n := range names {
		if !have[n] {
			problems = append(problems, fmt.Sprintf("targets[%d]: unknown target %q", i, n))
		}
	}
	if len(problems) > 0 {
		return nil, &InputError{Problems: problems}
	}
	if len(found) == 0 {
		return nil, &InputError{Problems: []string{"target_selector: no registered target matches"}}
	}
	if len(found) > spec.MaxTargets {
		field := "targets"
		if len(selector) > 0 {
			field = "target_selector"
		}
		return nil, &InputError{Problems: []string{field + ": " + spec.TooManyTargets(len(found))}}
	}
	return found, nil
}

// StepRecord is a step to record when a deployment starts.
type StepRecord struct {
	Name            string
	Command         string
	Timeout         time.Duration
	ContinueOnError bool
}

// StartDeployment records the steps and the resolved targets and marks the deployment
// running, with a deployment.started event (whose actor is the token that created
// it), in one transaction. Calling it again changes nothing.
func StartDeployment(ctx context.Context, db TxBeginner, id uuid.UUID, steps []StepRecord, targets []string) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := RecordDeploymentTargets(ctx, tx, id, targets); err != nil {
			return err
		}
		for i, s := range steps {
			if _, err := tx.Exec(ctx, `
				INSERT INTO deployment_steps (deployment_id, position, name, command, timeout, continue_on_error)
				VALUES ($1, $2, $3, $4, make_interval(secs => $5), $6)
				ON CONFLICT DO NOTHING`, id, i, s.Name, s.Command, s.Timeout.Seconds(), s.ContinueOnError); err != nil {
				return fmt.Errorf("recording step %d: %w", i, err)
			}
		}
		var createdBy *string
		err := tx.QueryRow(ctx, `UPDATE deployments SET status = 'running', started_at = now() WHERE id = $1 AND status = 'pending'
			RETURNING created_by`, id).Scan(&createdBy)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("starting deployment: %w", err)
		}
		data := map[string]any{"targets": targets, "steps": len(steps)}
		if createdBy != nil {
			data[EventActor] = *createdBy
		}
		return InsertEvent(ctx, tx, &id, "deployment.started", data)
	})
}

// StartStep marks a step running with a step.started event.
func StartStep(ctx context.Context, db TxBeginner, id uuid.UUID, position int, targets int) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		var name string
		err := tx.QueryRow(ctx, `
			UPDATE deployment_steps SET status = 'running', started_at = now()
			WHERE deployment_id = $1 AND position = $2 AND status = 'pending' RETURNING name`, id, position).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("starting step %d: %w", position, err)
		}
		return InsertEvent(ctx, tx, &id, "step.started", map[string]any{"step": name, "step_position": position, "targets": targets})
	})
}

// EnqueueStepTargets enqueues a step's dispatch requests for targets in one statement,
// with a target.queued event each, in one transaction. Keys derive from deployment,
// step and target, so a retried call writes nothing twice.
func EnqueueStepTargets(ctx context.Context, db TxBeginner, id uuid.UUID, position int, priority string, step NewStepCommand, targets []string) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		reqs := make([]NewDispatchRequest, len(targets))
		for i, t := range targets {
			pos := position
			reqs[i] = NewDispatchRequest{
				IdempotencyKey: fmt.Sprintf("%s:%d:%s", id, position, t), Target: t, DeploymentID: &id, StepPosition: &pos,
				Command: step.Command, Timeout: step.Timeout, Priority: priority, Env: step.Env, WorkingDir: step.WorkingDir,
			}
		}
		out, err := EnqueueDispatchRequests(ctx, tx, reqs)
		if err != nil {
			return err
		}
		for i, o := range out {
			if !o.Created {
				continue
			}
			if err := InsertEvent(ctx, tx, &id, "target.queued", map[string]any{
				"step_position": position, "target": targets[i], "request_id": o.ID,
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// NewStepCommand is what a step runs on each target.
type NewStepCommand struct {
	Command    string
	Timeout    time.Duration
	Env        map[string]string
	WorkingDir string
}

// TargetResult is how one target's step ended.
type TargetResult struct {
	Target   string `json:"target"`
	Status   string `json:"status"` // succeeded or failed
	ExitCode *int   `json:"exit_code,omitempty"`
	Error    string `json:"error,omitempty"`
}

// StepResults returns the targets among waiting whose step has ended: their command
// finished, or their request failed, expired or was cancelled without one.
func StepResults(ctx context.Context, db DB, id uuid.UUID, position int, waiting []string) ([]TargetResult, error) {
	rows, err := db.Query(ctx, `
		SELECT t.name, p.status, c.status, c.exit_code, coalesce(c.error, p.last_error, '')
		FROM pending_dispatch_requests p
		JOIN targets t ON t.id = p.target_id
		LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
		WHERE p.deployment_id = $1 AND p.step_position = $2 AND t.name = ANY($3)
		  AND (p.status IN ('failed', 'expired', 'cancelled')
		       OR (p.status = 'dispatched' AND c.status IN ('succeeded', 'failed', 'cancelled', 'lost')))
		ORDER BY t.name`, id, position, waiting)
	if err != nil {
		return nil, fmt.Errorf("reading step results: %w", err)
	}
	defer rows.Close()
	var out []TargetResult
	for rows.Next() {
		var (
			r             TargetResult
			reqStatus     string
			commandStatus *string
		)
		if err := rows.Scan(&r.Target, &reqStatus, &commandStatus, &r.ExitCode, &r.Error); err != nil {
			return nil, err
		}
		r.Status = "failed"
		if commandStatus != nil && *commandStatus == "succeeded" && reqStatus == StatusDispatched {
			r.Status = "succeeded"
		}
		if r.Status == "failed" && r.Error == "" && r.ExitCode != nil {
			r.Error = fmt.Sprintf("exit code %d", *r.ExitCode)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// FinishStep records a step's end (succeeded, failed, skipped or cancelled) with a
// step.<status> event.
func FinishStep(ctx context.Context, db TxBeginner, id uuid.UUID, position int, status string, summary map[string]any) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		var name string
		err := tx.QueryRow(ctx, `
			UPDATE deployment_steps SET status = $3, finished_at = now()
			WHERE deployment_id = $1 AND position = $2 AND status IN ('pending', 'running') RETURNING name`, id, position, status).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("finishing step %d: %w", position, err)
		}
		data := map[string]any{"step": name, "step_position": position}
		for k, v := range summary {
			data[k] = v
		}
		return InsertEvent(ctx, tx, &id, "step."+status, data)
	})
}

// FinishDeployment records the deployment's end with a deployment.<status> event.
// A deployment already ended (e.g. failed by a dead Thorax) keeps its state.
func FinishDeployment(ctx context.Context, db TxBeginner, id uuid.UUID, status, reason string) (final string, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		var errText *string
		if reason != "" {
			errText = &reason
		}
		e := tx.QueryRow(ctx, `
			UPDATE deployments SET status = $2, finished_at = now(), error = $3
			WHERE id = $1 AND status IN ('pending', 'running') RETURNING status`, id, status, errText).Scan(&final)
		if errors.Is(e, pgx.ErrNoRows) {
			return tx.QueryRow(ctx, `SELECT status FROM deployments WHERE id = $1`, id).Scan(&final)
		}
		if e != nil {
			return fmt.Errorf("finishing deployment: %w", e)
		}
		data := map[string]any{"status": status}
		if reason != "" {
			data["reason"] = reason
		}
		return InsertEvent(ctx, tx, &id, "deployment."+status, data)
	})
	return final, err
}

// CancelDeploymentWork stops what a cancelled deployment has not finished: requests
// not yet dispatched end cancelled, and commands queued or running are cancelled (Thorax
// learns of running ones on its next heartbeat and kills them). It returns how many
// commands were cancelled.
func CancelDeploymentWork(ctx context.Context, db TxBeginner, id uuid.UUID) (int, error) {
	var n int
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			UPDATE pending_dispatch_requests SET status = 'cancelled', finished_at = now(), claimed_by = NULL,
			       last_error = 'deployment cancelled'
			WHERE deployment_id = $1 AND status IN ('pending', 'processing')`, id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE command_queue SET status = 'cancelled', finished_at = now(), error = 'deployment cancelled'
			WHERE deployment_id = $1 AND status IN ('queued', 'running')`, id)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		_, err = tx.Exec(ctx, `
			UPDATE pending_dispatch_requests p SET status = 'cancelled', finished_at = now(), last_error = 'deployment cancelled'
			FROM command_queue c
			WHERE p.deployment_id = $1 AND p.status = 'dispatched' AND c.dispatch_request_id = p.id
			  AND c.dispatch_attempt = p.attempts AND c.status = 'cancelled'`, id)
		return err
	})
	return n, err
}

// EventActor is the key of an event's data that names the API token behind it.
const EventActor = "actor"

// EventCancelRequested is the event of a cancel asked for through the API; the
// deployment.cancelled event follows once the workflow has stopped its work.
const EventCancelRequested = "deployment.cancel_requested"

// RecordCancelRequest records that actor asked to cancel deployment id.
func RecordCancelRequest(ctx context.Context, db DB, id uuid.UUID, actor string) error {
	return InsertEvent(ctx, db, &id, EventCancelRequested, map[string]any{EventActor: actor})
}

func inTx(ctx context.Context, db TxBeginner, f func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
