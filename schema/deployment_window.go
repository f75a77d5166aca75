package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// MaxFailedTargetsShown is how many failed targets a step's progress names; the rest
// are counted. It keeps the progress a workflow receives small at any size.
const MaxFailedTargetsShown = 20

// maxFailedTargetError bounds the error text of a failed target in a step's progress.
const maxFailedTargetError = 200

// RecordDeploymentTargets records a deployment's resolved targets in order, once: a
// second call keeps the first list. It returns how many targets the deployment has.
func RecordDeploymentTargets(ctx context.Context, db DB, id uuid.UUID, targets []string) (int, error) {
	if err := queries.RecordDeploymentTargets(ctx, db, dbsqlc.RecordDeploymentTargetsParams{DeploymentID: id, Targets: targets}); err != nil {
		return 0, fmt.Errorf("recording targets of deployment %s: %w", id, err)
	}
	return DeploymentTargetCount(ctx, db, id)
}

// DeploymentTargetCount is how many targets a deployment runs on.
func DeploymentTargetCount(ctx context.Context, db DB, id uuid.UUID) (int, error) {
	n, err := queries.DeploymentTargetCount(ctx, db, id)
	if err != nil {
		return 0, fmt.Errorf("counting targets of deployment %s: %w", id, err)
	}
	return int(n), nil
}

// stepState is what AdvanceStep reads of a step under its lock.
type stepState struct {
	status          string
	continueOnError bool
	priority        string
	maxParallel     *int32
	command         NewStepCommand
}

// AdvanceStep keeps a step's window, in one transaction: it starts the step when it is
// pending, tops the window up to the deployment's max_parallel with the next targets in
// deployment order (none once a target failed, unless the step continues on error), and
// records the step's end once every enqueued target has ended and nothing more will
// start. It is idempotent: a retried call changes only what the first did not.
func AdvanceStep(ctx context.Context, db TxBeginner, id uuid.UUID, position int) (domain.StepProgress, error) {
	return AdvanceStepIn(ctx, db, id, position, domain.StepWindow{})
}

// AdvanceStepIn is AdvanceStep within w: on the step's scope, up to the batch's end,
// and within the failure room.
func AdvanceStepIn(ctx context.Context, db TxBeginner, id uuid.UUID, position int, w domain.StepWindow) (domain.StepProgress, error) {
	p, _, err := AdvanceStepStarting(ctx, db, id, position, w)
	return p, err
}

// AdvanceStepStarting is AdvanceStepIn that also says whether this call started the
// step.
func AdvanceStepStarting(ctx context.Context, db TxBeginner, id uuid.UUID, position int, w domain.StepWindow) (p domain.StepProgress, started bool, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		st, err := lockStep(ctx, tx, id, position)
		if err != nil {
			return err
		}
		if p, err = stepCounts(ctx, tx, id, position); err != nil {
			return err
		}
		p.Total = w.Total(p.Total)
		if st.status == domain.StepPending {
			if err := StartStep(ctx, tx, id, position, p.Total); err != nil {
				return err
			}
			st.status, started = domain.StepRunning, true
		}
		if err := topUpWindow(ctx, tx, id, position, st, w, &p); err != nil {
			return err
		}
		if err := endStepWhenDone(ctx, tx, id, position, st, w, &p); err != nil {
			return err
		}
		if p.Failed > 0 {
			p.FailedTargets, err = failedTargets(ctx, tx, id, position)
		}
		return err
	})
	return p, started && err == nil, err
}

// windowStopped reports whether the step starts no more targets after failed failures: at
// the first unless it continues on error, or past the failure room when w has one.
func windowStopped(w domain.StepWindow, st stepState, failed int) bool {
	if w.FailureRoom != nil {
		return failed > *w.FailureRoom
	}
	return failed > 0 && !st.continueOnError
}

// topUpWindow enqueues the step for as many more targets as its window has room for,
// up to the batch's end, none once the step stopped on its failures.
func topUpWindow(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int, st stepState, w domain.StepWindow, p *domain.StepProgress) error {
	if st.status != domain.StepRunning || windowStopped(w, st, p.Failed) {
		return nil
	}
	window := p.Total
	if st.maxParallel != nil && int(*st.maxParallel) < window {
		window = int(*st.maxParallel)
	}
	n := min(window-p.Running, w.End(p.Total)-p.Enqueued)
	if n <= 0 {
		return nil
	}
	if w.Only != "" {
		if err := EnqueueStepTargets(ctx, tx, id, position, st.priority, st.command, []string{w.Only}); err != nil {
			return err
		}
	} else if err := enqueueNext(ctx, tx, id, position, st, n); err != nil {
		return err
	}
	p.Enqueued += n
	p.Running += n
	return nil
}

// endStepWhenDone sets p.Done and p.Status: the step's state when it has ended
// already, else, once nothing runs and nothing more will start, the end it records.
func endStepWhenDone(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int, st stepState, w domain.StepWindow, p *domain.StepProgress) error {
	stopped := windowStopped(w, st, p.Failed)
	p.Skipped = p.Total - p.Enqueued
	switch {
	case st.status != domain.StepRunning:
		p.Done, p.Status = true, st.status
	case p.Running == 0 && !stopped && p.Enqueued < p.Total && p.Enqueued >= w.End(p.Total):
		p.BatchDone = true
	case p.Running == 0 && (p.Enqueued == p.Total || stopped):
		p.Done, p.Status = true, domain.StepSucceeded
		if p.Failed > 0 {
			p.Status = domain.StepFailed
		}
		return FinishStep(ctx, tx, id, position, p.Status, StepTally{Succeeded: p.Succeeded, Failed: p.Failed, Skipped: p.Skipped})
	}
	return nil
}

// lockStep reads a step and what its commands need, holding the step's row so that
// overlapping calls for one step take turns. The step's env_secret joins its env as
// stored: sealed, opened only when a Thorax fetches the command.
func lockStep(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int) (stepState, error) {
	row, err := queries.LockStep(ctx, tx, dbsqlc.LockStepParams{DeploymentID: id, Position: int32(position)})
	if err = notFound(err); errors.Is(err, ErrNotFound) {
		return stepState{}, domain.Invalid(fmt.Sprintf("step %d", position), fmt.Sprintf("deployment %s has no such step", id))
	}
	if err != nil {
		return stepState{}, fmt.Errorf("reading step %d of deployment %s: %w", position, id, err)
	}
	st := stepState{
		status: row.Status, continueOnError: row.ContinueOnError, priority: row.Priority, maxParallel: row.MaxParallel,
		command: NewStepCommand{Command: row.Command, Timeout: row.Timeout, WorkingDir: row.WorkingDir, Round: int(row.RetryRound)},
	}
	if err := json.Unmarshal(row.Env, &st.command.Env); err != nil {
		return st, fmt.Errorf("reading env of step %d of deployment %s: %w", position, id, err)
	}
	return st, nil
}

// stepCounts counts a step's targets by where they stand. A target has ended when its
// request failed, expired or was cancelled, or its command of the latest delivery ended.
func stepCounts(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int) (domain.StepProgress, error) {
	c, err := queries.StepCounts(ctx, tx, dbsqlc.StepCountsParams{DeploymentID: id, Position: int32(position)})
	if err != nil {
		return domain.StepProgress{}, fmt.Errorf("counting results of step %d of deployment %s: %w", position, id, err)
	}
	return domain.StepProgress{
		Total: int(c.Total), Enqueued: int(c.Enqueued), Succeeded: int(c.Succeeded),
		Failed: int(c.Ended - c.Succeeded), Running: int(c.Enqueued - c.Ended),
	}, nil
}

// enqueueNext enqueues the step for the next n targets, in deployment order, that it
// has not been enqueued for.
func enqueueNext(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int, st stepState, n int) error {
	names, err := queries.NextTargetsOfStep(ctx, tx, dbsqlc.NextTargetsOfStepParams{
		DeploymentID: id, Position: int32(position), N: int32(n),
	})
	if err != nil {
		return fmt.Errorf("choosing the next targets of step %d: %w", position, err)
	}
	return EnqueueStepTargets(ctx, tx, id, position, st.priority, st.command, names)
}

// failedTargets names up to MaxFailedTargetsShown targets the step failed on, by name.
func failedTargets(ctx context.Context, tx pgx.Tx, id uuid.UUID, position int) ([]domain.TargetResult, error) {
	rows, err := queries.FailedTargetsOfStep(ctx, tx, dbsqlc.FailedTargetsOfStepParams{
		DeploymentID: id, Position: int32(position), MaxRows: MaxFailedTargetsShown,
	})
	if err != nil {
		return nil, fmt.Errorf("reading failed targets of step %d: %w", position, err)
	}
	out := make([]domain.TargetResult, len(rows))
	for i, r := range rows {
		out[i] = failedResult(r.Target, r.ExitCode, r.Error)
		out[i].Error = truncateText(out[i].Error, maxFailedTargetError)
	}
	return out, nil
}

// SkipSteps records every step from position on that has not started as skipped, each
// with a step.skipped event naming how many targets it skipped.
func SkipSteps(ctx context.Context, db TxBeginner, id uuid.UUID, from int) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		n, err := DeploymentTargetCount(ctx, tx, id)
		if err != nil {
			return err
		}
		positions, err := queries.PendingStepsFrom(ctx, tx, dbsqlc.PendingStepsFromParams{DeploymentID: id, Position: int32(from)})
		if err != nil {
			return fmt.Errorf("reading steps to skip: %w", err)
		}
		for _, pos := range positions {
			if err := FinishStep(ctx, tx, id, int(pos), domain.StepSkipped, StepTally{Skipped: n}); err != nil {
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

// TouchedTargets counts the targets the steps at positions below steps reached: a
// prefix of the deployment's targets in order, since every step starts them in order.
func TouchedTargets(ctx context.Context, db DB, id uuid.UUID, steps int) (int, error) {
	n, err := queries.TouchedTargetCount(ctx, db, dbsqlc.TouchedTargetCountParams{DeploymentID: id, Steps: int32(steps)})
	if err != nil {
		return 0, fmt.Errorf("counting the targets deployment %s touched: %w", id, err)
	}
	return int(n), nil
}
