package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// StartStep marks a step running with a step.started event.
func StartStep(ctx context.Context, db TxBeginner, id uuid.UUID, position int, targets int) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		name, err := queries.MarkStepRunning(ctx, tx, dbsqlc.MarkStepRunningParams{DeploymentID: id, Position: int32(position)})
		if err = notFound(err); errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("starting step %d: %w", position, err)
		}
		return InsertEvent(ctx, tx, &id, events.StepStarted, events.StepStartedData{Step: name, StepPosition: position, Targets: targets})
	})
}

// NewStepCommand is what a step runs on each target.
type NewStepCommand struct {
	Command    string
	Timeout    time.Duration
	Env        map[string]string
	WorkingDir string
	// Round is the step's retry round: a retry a person asked for enqueues its targets
	// again as new requests, whose keys carry the round.
	Round int
}

// stepRequestKey is the idempotency key of a step's request for target in round.
func stepRequestKey(id uuid.UUID, position int, target string, round int) string {
	if round == 0 {
		return fmt.Sprintf("%s:%d:%s", id, position, target)
	}
	return fmt.Sprintf("%s:%d:%s:retry%d", id, position, target, round)
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
				IdempotencyKey: stepRequestKey(id, position, t, step.Round), Target: t, DeploymentID: &id, StepPosition: &pos,
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
			if err := InsertEvent(ctx, tx, &id, events.TargetQueued, events.TargetQueuedData{
				StepPosition: position, Target: targets[i], RequestID: o.ID,
			}); err != nil {
				return err
			}
		}
		return nil
	})
}

// failedResult is the result of a target whose step failed; a failure without an
// error text is named by its exit code.
func failedResult(target string, exitCode *int32, errText string) domain.TargetResult {
	r := domain.TargetResult{Target: target, Status: domain.CommandFailed, ExitCode: intPtr(exitCode), Error: errText}
	if r.Error == "" && r.ExitCode != nil {
		r.Error = fmt.Sprintf("exit code %d", *r.ExitCode)
	}
	return r
}

// StepTally counts a step's targets by how they ended: the counts of its
// step.<status> event.
type StepTally struct {
	Succeeded, Failed, Skipped int
}

// FinishStep records a step's end (succeeded, failed, skipped or cancelled) with a
// step.<status> event carrying the tally.
func FinishStep(ctx context.Context, db TxBeginner, id uuid.UUID, position int, status string, tally StepTally) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		name, err := queries.MarkStepEnded(ctx, tx, dbsqlc.MarkStepEndedParams{
			DeploymentID: id, Position: int32(position), Status: status,
		})
		if err = notFound(err); errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("finishing step %d: %w", position, err)
		}
		return InsertEvent(ctx, tx, &id, events.StepEnded(status), events.StepEndedData{
			Step: name, StepPosition: position, Succeeded: tally.Succeeded, Failed: tally.Failed, Skipped: tally.Skipped,
		})
	})
}
