package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// MaxFailedTargetsShown is how many failed targets a step's progress names; the rest
// are counted. It keeps the progress a workflow receives small at any size.
const MaxFailedTargetsShown = 20

// maxFailedTargetError bounds the error text of a failed target in a step's progress.
const maxFailedTargetError = 200

// RecordDeploymentTargets records a deployment's resolved targets in order, once: a
// second call keeps the first list. It returns how many targets the deployment has.
func RecordDeploymentTargets(ctx context.Context, db DB, id uuid.UUID, targets []string) (int, error) {
	if _, err := db.Exec(ctx, `
		INSERT INTO deployment_targets (deployment_id, ordinal, target_id)
		SELECT $1, n.ord - 1, t.id
		FROM unnest($2::text[]) WITH ORDINALITY AS n(name, ord)
		JOIN targets t ON t.name = n.name
		WHERE NOT EXISTS (SELECT 1 FROM deployment_targets WHERE deployment_id = $1)`, id, targets); err != nil {
		return 0, fmt.Errorf("recording targets of deployment %s: %w", id, err)
	}
	return DeploymentTargetCount(ctx, db, id)
}

// DeploymentTargetCount is how many targets a deployment runs on.
func DeploymentTargetCount(ctx context.Context, db DB, id uuid.UUID) (int, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM deployment_targets WHERE deployment_id = $1`, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting targets of deployment %s: %w", id, err)
	}
	return n, nil
}

// StepProgress is where a step stands: counts, and up to MaxFailedTargetsShown failed
// targets. It never lists the targets themselves.
type StepProgress struct {
	Total     int `json:"total"`
	Enqueued  int `json:"enqueued"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// Running is enqueued and not yet ended.
	Running int `json:"running"`
	// Skipped is what the step will never enqueue (it stopped on a failure).
	Skipped int `json:"skipped"`
	// Done is set once the step has ended and is recorded with Status.
	Done          bool           `json:"done"`
	Status        string         `json:"status,omitempty"`
	FailedTargets []TargetResult `json:"failed_targets,omitempty"`
}

// stepState is what AdvanceStep reads of a step under its lock.
type stepState struct {
	status          string
	continueOnError bool
	priority        string
	maxParallel     *int
	command         NewStepCommand
}

// AdvanceStep keeps a step's window, in one transaction: it starts the step when it is
// pending, tops the window up to the deployment's max_parallel with the next targets in
// deployment order (none once a target failed, unless the step continues on error), and
// records the step's end once every enqueued target has ended and nothing more will
// start. It is idempotent: a retried call changes only what the first did not.
func AdvanceStep(ctx context.Context, db TxBeginner, id uuid.UUID, position int) (StepProgress, error) {
	var p StepProgress
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		st, err := lockStep(ctx, tx, id, position)
		if err != nil {
			return err
		}
		if st.status == "pending" {
			if p.Total, err = DeploymentTargetCount(ctx, tx, id); err != nil {
				return err
			}
			if err := StartStep(ctx, tx, id, position, p.Total); err != nil {
				return err
			}
			st.status = "running"
		}
		if p, err = stepCounts(ctx, tx, id, position); err != nil {
			return err
		}
		if st.status == "running" && (p.Failed == 0 || st.continueOnError) {
			window := p.Total
			if st.maxParallel != nil && *st.maxParallel < window {
				window = *st.maxParallel
			}
			if n := min(window-p.Running, p.Total-p.Enqueued); n > 0 {
				if err := enqueueNext(ctx, tx, id, position, st, n); err != nil {
					return err
				}
				p.Enqueued += n
				p.Running += n
			}
		}
		stopped := p.Failed > 0 && !st.continueOnError
		p.Skipped = p.Total - p.Enqueued
		switch {
		case st.status != "running":
			p.Done, p.Status = true, st.status
		case p.Running == 0 && (p.Enqueued == p.Total || stopped):
			p.Done, p.Status = true, "succeeded"
			if p.Failed > 0 {
				p.Status = "failed"
			}
			if err := FinishStep(ctx, tx, id, position, p.Status, map[string]any{
				"succeeded": p.Succeeded, "failed": p.Failed, "skipped": p.Skipped}); err != nil {
				return err
			}
		}
		if p.Failed > 0 {
			p.FailedTargets, err = failedTargets(ctx, tx, id, position)
		}
		return err
	})
	return p, err
}

// lockStep reads a step and what its commands need, holding the step's row so that
// overlapping calls for one step take turns. The step's env_secret joins its env as
// stored: sealed, opened only when a Thorax fetches the command.
func lockStep(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int) (stepState, error) {
	var (
		st      stepState
		timeout time.Duration
		env     []byte
		dir     *string
	)
	err := tx.QueryRow(ctx, `
		SELECT s.status, s.continue_on_error, s.command, s.timeout, d.priority, d.max_parallel,
		       coalesce(d.spec->'steps'->($2::int)->'env', '{}'::jsonb) || coalesce(d.spec->'steps'->($2::int)->'env_secret', '{}'::jsonb),
		       d.spec->'steps'->($2::int)->>'working_dir'
		FROM deployment_steps s JOIN deployments d ON d.id = s.deployment_id
		WHERE s.deployment_id = $1 AND s.position = $2
		FOR UPDATE OF s`, id, position).Scan(&st.status, &st.continueOnError, &st.command.Command, &timeout,
		&st.priority, &st.maxParallel, &env, &dir)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, &InputError{Problems: []string{fmt.Sprintf("step %d: deployment %s has no such step", position, id)}}
	}
	if err != nil {
		return st, fmt.Errorf("reading step %d of deployment %s: %w", position, id, err)
	}
	st.command.Timeout = timeout
	if dir != nil {
		st.command.WorkingDir = *dir
	}
	if err := json.Unmarshal(env, &st.command.Env); err != nil {
		return st, fmt.Errorf("reading env of step %d of deployment %s: %w", position, id, err)
	}
	return st, nil
}

// stepCounts counts a step's targets by where they stand. A target has ended when its
// request failed, expired or was cancelled, or its command of the latest delivery ended.
func stepCounts(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int) (StepProgress, error) {
	var p StepProgress
	var ended int
	err := tx.QueryRow(ctx, `
		WITH s AS (
		    SELECT p.status IN ('failed', 'expired', 'cancelled')
		           OR (p.status = 'dispatched' AND c.status IN ('succeeded', 'failed', 'cancelled', 'lost')) AS ended,
		           p.status = 'dispatched' AND c.status IS NOT DISTINCT FROM 'succeeded' AS ok
		    FROM pending_dispatch_requests p
		    LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
		    WHERE p.deployment_id = $1 AND p.step_position = $2
		)
		SELECT (SELECT count(*) FROM deployment_targets WHERE deployment_id = $1),
		       count(*), count(*) FILTER (WHERE ended), count(*) FILTER (WHERE ended AND ok)
		FROM s`, id, position).Scan(&p.Total, &p.Enqueued, &ended, &p.Succeeded)
	if err != nil {
		return p, fmt.Errorf("counting results of step %d of deployment %s: %w", position, id, err)
	}
	p.Failed = ended - p.Succeeded
	p.Running = p.Enqueued - ended
	return p, nil
}

// enqueueNext enqueues the step for the next n targets, in deployment order, that it
// has not been enqueued for.
func enqueueNext(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int, st stepState, n int) error {
	rows, err := tx.Query(ctx, `
		SELECT t.name
		FROM deployment_targets dt JOIN targets t ON t.id = dt.target_id
		WHERE dt.deployment_id = $1
		  AND NOT EXISTS (SELECT 1 FROM pending_dispatch_requests p
		                  WHERE p.deployment_id = $1 AND p.step_position = $2 AND p.target_id = dt.target_id)
		ORDER BY dt.ordinal
		LIMIT $3`, id, position, n)
	if err != nil {
		return fmt.Errorf("choosing the next targets of step %d: %w", position, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("choosing the next targets of step %d: %w", position, err)
	}
	return EnqueueStepTargets(ctx, tx, id, position, st.priority, st.command, names)
}

// failedTargets names up to MaxFailedTargetsShown targets the step failed on, by name.
func failedTargets(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int) ([]TargetResult, error) {
	rows, err := tx.Query(ctx, `
		SELECT t.name, c.exit_code, coalesce(c.error, p.last_error, '')
		FROM pending_dispatch_requests p
		JOIN targets t ON t.id = p.target_id
		LEFT JOIN command_queue c ON c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts
		WHERE p.deployment_id = $1 AND p.step_position = $2
		  AND (p.status IN ('failed', 'expired', 'cancelled')
		       OR (p.status = 'dispatched' AND c.status IN ('failed', 'cancelled', 'lost')))
		ORDER BY t.name
		LIMIT $3`, id, position, MaxFailedTargetsShown)
	if err != nil {
		return nil, fmt.Errorf("reading failed targets of step %d: %w", position, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TargetResult, error) {
		res := TargetResult{Status: "failed"}
		if err := r.Scan(&res.Target, &res.ExitCode, &res.Error); err != nil {
			return res, err
		}
		if res.Error == "" && res.ExitCode != nil {
			res.Error = fmt.Sprintf("exit code %d", *res.ExitCode)
		}
		res.Error = truncateText(res.Error, maxFailedTargetError)
		return res, nil
	})
}

// SkipSteps records every step from position on that has not started as skipped, each
// with a step.skipped event naming how many targets it skipped.
func SkipSteps(ctx context.Context, db TxBeginner, id uuid.UUID, from int) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		n, err := DeploymentTargetCount(ctx, tx, id)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT position FROM deployment_steps
			WHERE deployment_id = $1 AND position >= $2 AND status = 'pending' ORDER BY position`, id, from)
		if err != nil {
			return fmt.Errorf("reading steps to skip: %w", err)
		}
		positions, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("reading steps to skip: %w", err)
		}
		for _, pos := range positions {
			if err := FinishStep(ctx, tx, id, pos, "skipped", map[string]any{"succeeded": 0, "failed": 0, "skipped": n}); err != nil {
				return err
			}
		}
		return nil
	})
}

// truncateText cuts s to at most n bytes on a character boundary, marking the cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
