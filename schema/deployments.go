package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
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
	key := nullString(d.IdempotencyKey)
	var maxParallel *int32
	if d.MaxParallel > 0 {
		n := int32(d.MaxParallel)
		maxParallel = &n
	}
	id, err = queries.InsertDeployment(ctx, db, dbsqlc.InsertDeploymentParams{
		ID: d.ID, Name: d.Name, Priority: d.Priority, Spec: d.Spec,
		IdempotencyKey: key, MaxParallel: maxParallel, CreatedBy: d.CreatedBy,
	})
	if err = notFound(err); err == nil {
		return id, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return uuid.Nil, false, fmt.Errorf("creating deployment: %w", err)
	}
	id, err = queries.ExistingDeployment(ctx, db, dbsqlc.ExistingDeploymentParams{ID: d.ID, IdempotencyKey: key})
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("reading existing deployment: %w", notFound(err))
	}
	return id, false, nil
}

// ResolveTargets returns the registered targets a deployment runs on: the named ones
// and those whose labels match every key=value of selector, sorted, without repeats.
// Unknown names, and more than spec.MaxTargets targets, are a *domain.InputError.
func ResolveTargets(ctx context.Context, db DB, names []string, selector map[string]string) ([]string, error) {
	sel := selector
	if sel == nil {
		sel = map[string]string{}
	}
	selJSON, err := json.Marshal(sel)
	if err != nil {
		return nil, err
	}
	found, err := queries.TargetsNamedOrSelected(ctx, db, dbsqlc.TargetsNamedOrSelectedParams{Names: names, Selector: selJSON})
	if err != nil {
		return nil, fmt.Errorf("resolving targets: %w", err)
	}
	have := map[string]bool{}
	for _, n := range found {
		have[n] = true
	}
	var problems domain.Problems
	for i, n := range names {
		if !have[n] {
			problems.Addf(fmt.Sprintf("targets[%d]", i), "unknown target %q", n)
		}
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, domain.Invalid("target_selector", "no registered target matches")
	}
	if len(found) > spec.MaxTargets {
		field := "targets"
		if len(selector) > 0 {
			field = "target_selector"
		}
		return nil, domain.Invalid(field, spec.TooManyTargets(len(found)))
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
			if err := queries.InsertStep(ctx, tx, dbsqlc.InsertStepParams{
				DeploymentID: id, Position: int32(i), Name: s.Name, Command: s.Command,
				TimeoutSeconds: s.Timeout.Seconds(), ContinueOnError: s.ContinueOnError,
			}); err != nil {
				return fmt.Errorf("recording step %d: %w", i, err)
			}
		}
		createdBy, err := queries.MarkDeploymentRunning(ctx, tx, id)
		if err = notFound(err); errors.Is(err, ErrNotFound) {
			return refuseEnded(ctx, tx, id) // running already (a retry), or ended
		}
		if err != nil {
			return fmt.Errorf("starting deployment: %w", err)
		}
		data := events.DeploymentStartedData{Targets: targets, Steps: len(steps)}
		if createdBy != nil {
			data.Actor = *createdBy
		}
		return InsertEvent(ctx, tx, &id, events.DeploymentStarted, data)
	})
}

// ErrDeploymentEnded is returned by StartDeployment for a deployment that has ended.
var ErrDeploymentEnded = errors.New("deployment has already ended")

// refuseEnded returns nil for a deployment that runs and ErrDeploymentEnded, naming
// the state, for one that ended.
func refuseEnded(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	status, err := queries.DeploymentStatus(ctx, tx, id)
	if err != nil {
		return fmt.Errorf("reading the state of deployment %s: %w", id, notFound(err))
	}
	if status == domain.DeploymentPending || status == domain.DeploymentRunning {
		return nil
	}
	return fmt.Errorf("starting deployment %s: %w (%s)", id, ErrDeploymentEnded, status)
}

// FinishDeployment records the deployment's end with a deployment.<status> event.
// A deployment already ended (e.g. failed by a dead Thorax) keeps its state.
func FinishDeployment(ctx context.Context, db TxBeginner, id uuid.UUID, status, reason string) (final string, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		final, err = queries.MarkDeploymentEnded(ctx, tx, dbsqlc.MarkDeploymentEndedParams{
			ID: id, Status: status, Error: nullString(reason),
		})
		if err = notFound(err); errors.Is(err, ErrNotFound) {
			if final, err = queries.DeploymentStatus(ctx, tx, id); err != nil {
				return fmt.Errorf("reading the state of deployment %s: %w", id, notFound(err))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("finishing deployment: %w", err)
		}
		return InsertEvent(ctx, tx, &id, events.DeploymentEnded(status), events.DeploymentEndedData{Status: status, Reason: reason})
	})
	return final, err
}

// CancelDeploymentWork stops what a cancelled deployment has not finished: requests
// not yet dispatched end cancelled, and commands queued or running are cancelled (Thorax
// learns of running ones on its next heartbeat and kills them). It returns how many
// commands were cancelled.
func CancelDeploymentWork(ctx context.Context, db TxBeginner, id uuid.UUID) (int, error) {
	var n int64
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		if err := queries.CancelUndispatchedRequests(ctx, tx, id); err != nil {
			return fmt.Errorf("cancelling the requests of deployment %s: %w", id, err)
		}
		var err error
		if n, err = queries.CancelUnfinishedCommands(ctx, tx, id); err != nil {
			return fmt.Errorf("cancelling the commands of deployment %s: %w", id, err)
		}
		if err := queries.CancelDispatchedRequests(ctx, tx, id); err != nil {
			return fmt.Errorf("cancelling the dispatched requests of deployment %s: %w", id, err)
		}
		return nil
	})
	return int(n), err
}

// EventCancelRequested is the type of the event of a cancel asked for through the
// API (events.DeploymentCancelRequested, as a string for readers that key on it).
const EventCancelRequested = string(events.DeploymentCancelRequested)

// RecordCancelRequest records that actor asked to cancel deployment id; the
// deployment.cancelled event follows once the workflow has stopped its work.
func RecordCancelRequest(ctx context.Context, db DB, id uuid.UUID, actor string) error {
	return InsertEvent(ctx, db, &id, events.DeploymentCancelRequested, events.CancelRequestedData{Actor: actor})
}
