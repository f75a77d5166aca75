package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// MaxDecisionsListed bounds the decisions one deployment's list returns.
const MaxDecisionsListed = 1000

// NewDecision is a decision to record: what, by whom, when, at which step, and the
// Temporal Update that carried it (its id makes the record idempotent).
type NewDecision struct {
	DeploymentID uuid.UUID
	Decision     string
	By           string
	Comment      string
	Step         *int
	At           time.Time
	UpdateID     string
}

// RecordDecision stores a decision once per update id, with its event
// (deployment.paused, deployment.resumed or deployment.decided), and clears what the
// deployment waited for unless the decision is a pause. A repeated call returns the
// stored decision and writes nothing.
func RecordDecision(ctx context.Context, db TxBeginner, d NewDecision) (domain.Decision, error) {
	var out domain.Decision
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		row, err := queries.InsertDecision(ctx, tx, dbsqlc.InsertDecisionParams{
			DeploymentID: d.DeploymentID, Decision: d.Decision, DecidedBy: d.By, StepPosition: int32Ptr(d.Step),
			Comment: d.Comment, DecidedAt: d.At, UpdateID: d.UpdateID,
		})
		if err != nil {
			return fmt.Errorf("recording decision %s of deployment %s: %w", d.Decision, d.DeploymentID, err)
		}
		out = domain.Decision{Decision: row.Decision, By: row.DecidedBy, At: row.DecidedAt, Step: intPtr(row.StepPosition), Comment: row.Comment}
		if !row.Created {
			return nil
		}
		if d.Decision != domain.DecisionPause {
			if _, err := queries.SetDeploymentWaiting(ctx, tx, dbsqlc.SetDeploymentWaitingParams{ID: d.DeploymentID}); err != nil {
				return fmt.Errorf("clearing what deployment %s waits for: %w", d.DeploymentID, err)
			}
		}
		return InsertEvent(ctx, tx, &d.DeploymentID, decisionEvent(d.Decision), events.DecisionData{
			Decision: out.Decision, By: out.By, At: out.At, StepPosition: out.Step, Comment: out.Comment,
		})
	})
	return out, err
}

// decisionEvent is the event type that records decision.
func decisionEvent(decision string) events.Type {
	switch decision {
	case domain.DecisionPause:
		return events.DeploymentPaused
	case domain.DecisionResume:
		return events.DeploymentResumed
	default:
		return events.DeploymentDecided
	}
}

// Decisions lists a deployment's decisions, oldest first, at most MaxDecisionsListed.
func Decisions(ctx context.Context, db DB, id uuid.UUID) ([]domain.Decision, error) {
	rows, err := queries.DecisionsOfDeployment(ctx, db, dbsqlc.DecisionsOfDeploymentParams{DeploymentID: id, MaxRows: MaxDecisionsListed})
	if err != nil {
		return nil, fmt.Errorf("reading decisions of deployment %s: %w", id, err)
	}
	out := make([]domain.Decision, len(rows))
	for i, r := range rows {
		out[i] = domain.Decision{Decision: r.Decision, By: r.DecidedBy, At: r.DecidedAt, Step: intPtr(r.StepPosition), Comment: r.Comment}
	}
	return out, nil
}

// SetWaiting records what a running deployment waits for a person to decide, with a
// deployment.waiting event; nil clears it without an event. Recording the same wait
// again writes nothing.
func SetWaiting(ctx context.Context, db TxBeginner, id uuid.UUID, w *events.WaitingData) error {
	return inTx(ctx, db, func(tx pgx.Tx) error {
		var next []byte
		if w != nil {
			b, err := json.Marshal(waitingView(*w))
			if err != nil {
				return fmt.Errorf("encoding what deployment %s waits for: %w", id, err)
			}
			next = b
		}
		current, err := queries.DeploymentWaiting(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("reading what deployment %s waits for: %w", id, notFound(err))
		}
		if sameJSON(current, next) {
			return nil
		}
		if _, err := queries.SetDeploymentWaiting(ctx, tx, dbsqlc.SetDeploymentWaitingParams{ID: id, Waiting: next}); err != nil {
			return fmt.Errorf("recording what deployment %s waits for: %w", id, err)
		}
		if w == nil {
			return nil
		}
		return InsertEvent(ctx, tx, &id, events.DeploymentWaiting, *w)
	})
}

// Waiting is what a running deployment waits for a person to decide: an approval
// step (kind approval), a failed step that asks (on_failure) or a pause (paused), at
// which step, who may decide (empty: any deploy token) and since when. It is stored
// as JSON (deployments.waiting), under these names.
type Waiting struct {
	Kind      string     `json:"kind"`
	Step      int        `json:"step"`
	Approvers []string   `json:"approvers,omitempty"`
	Since     time.Time  `json:"since"`
	Deadline  *time.Time `json:"deadline,omitempty"`
}

// waitingView is what a deployment waits for, as stored.
func waitingView(w events.WaitingData) Waiting {
	return Waiting{Kind: w.Kind, Step: w.StepPosition, Approvers: w.Approvers, Since: w.Since.UTC(), Deadline: w.Deadline}
}

// sameJSON reports whether two stored JSON documents say the same.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

// DeploymentWaitingFor returns what a deployment waits for a person to decide, or nil.
func DeploymentWaitingFor(ctx context.Context, db DB, id uuid.UUID) (*Waiting, error) {
	raw, err := queries.DeploymentWaiting(ctx, db, id)
	if err != nil {
		return nil, notFound(err)
	}
	if len(raw) == 0 {
		return nil, nil
	}
	var w Waiting
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("reading what deployment %s waits for: %w", id, err)
	}
	return &w, nil
}

// RetryStep sets a failed step running again as retry round round: the requests of
// the targets it failed on are superseded, so the step's window enqueues those
// targets again as new requests (keys carrying the round), and then the targets the
// step never reached. A step already at round changes nothing. It returns how many
// targets the retry runs again, with a step.started event counting them.
func RetryStep(ctx context.Context, db TxBeginner, id uuid.UUID, position, round int) (int, error) {
	var n int64
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		name, err := queries.RestartStep(ctx, tx, dbsqlc.RestartStepParams{DeploymentID: id, Position: int32(position), Round: int32(round)})
		if err = notFound(err); errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("restarting step %d of deployment %s: %w", position, id, err)
		}
		n, err = queries.SupersedeFailedRequests(ctx, tx, dbsqlc.SupersedeFailedRequestsParams{DeploymentID: id, Position: int32(position)})
		if err != nil {
			return fmt.Errorf("superseding the failed requests of step %d: %w", position, err)
		}
		return InsertEvent(ctx, tx, &id, events.StepStarted, events.StepStartedData{Step: name, StepPosition: position, Targets: int(n)})
	})
	return int(n), err
}

func int32Ptr(p *int) *int32 {
	if p == nil {
		return nil
	}
	v := int32(*p)
	return &v
}
