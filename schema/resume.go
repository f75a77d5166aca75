package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Relations of a deployment to the one it was made from (deployments.relation).
const (
	// RelationResume is a deployment that resumes another from a step, on its failed
	// targets or on all of them.
	RelationResume = "resume"
	// RelationRerun is a deployment that runs another's spec again.
	RelationRerun = "rerun"
)

// Relations lists every relation, as the migration's CHECK constraint does.
var Relations = []string{RelationResume, RelationRerun}

// ErrLinkConflict is returned when a deployment is already linked to another
// deployment, or in another way, than the link asked for.
var ErrLinkConflict = errors.New("deployment already made from another deployment")

// DeploymentSource is what a resume or a re-run starts from: the deployment's
// status, its spec as stored (secrets sealed for it) and the status of each of its
// recorded steps, by position.
type DeploymentSource struct {
	Status string
	Spec   json.RawMessage
	Steps  []string
}

// DeploymentSourceOf reads deployment id's DeploymentSource, or ErrNotFound.
func DeploymentSourceOf(ctx context.Context, db DB, id uuid.UUID) (DeploymentSource, error) {
	row, err := queries.DeploymentStatusAndSpec(ctx, db, id)
	if err != nil {
		return DeploymentSource{}, notFound(err)
	}
	steps, err := queries.StepStatusesOfDeployment(ctx, db, id)
	if err != nil {
		return DeploymentSource{}, fmt.Errorf("reading the steps of deployment %s: %w", id, err)
	}
	src := DeploymentSource{Status: row.Status, Spec: row.Spec, Steps: make([]string, 0, len(steps))}
	for _, s := range steps {
		if int(s.Position) != len(src.Steps) {
			return DeploymentSource{}, fmt.Errorf("reading the steps of deployment %s: position %d out of order", id, s.Position)
		}
		src.Steps = append(src.Steps, s.Status)
	}
	return src, nil
}

// RelatedTarget is a target of an earlier deployment, by name, and whether a target
// of that name is registered now.
type RelatedTarget struct {
	Name       string
	Registered bool
}

// FailedTargetsOfStepAll names every target step position of deployment id failed
// on, in deployment order, at most maxRows: what FailedTargetsOfStep counts as
// failed, without its cap of a few rows.
func FailedTargetsOfStepAll(ctx context.Context, db DB, id uuid.UUID, position, maxRows int) ([]RelatedTarget, error) {
	rows, err := queries.AllFailedTargetsOfStep(ctx, db, dbsqlc.AllFailedTargetsOfStepParams{
		DeploymentID: id, Position: int32(position), MaxRows: int32(maxRows),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the failed targets of step %d of deployment %s: %w", position, id, err)
	}
	out := make([]RelatedTarget, len(rows))
	for i, r := range rows {
		out[i] = RelatedTarget{Name: r.Target, Registered: r.Registered}
	}
	return out, nil
}

// RecordedTargets names deployment id's recorded targets (deployment_targets) in
// deployment order, at most maxRows.
func RecordedTargets(ctx context.Context, db DB, id uuid.UUID, maxRows int) ([]RelatedTarget, error) {
	rows, err := queries.RecordedTargetsOfDeployment(ctx, db, dbsqlc.RecordedTargetsOfDeploymentParams{
		DeploymentID: id, MaxRows: int32(maxRows),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the targets of deployment %s: %w", id, err)
	}
	out := make([]RelatedTarget, len(rows))
	for i, r := range rows {
		out[i] = RelatedTarget{Name: r.Target, Registered: r.Registered}
	}
	return out, nil
}

// DeploymentLink says which deployment a deployment was made from and how.
type DeploymentLink struct {
	Previous uuid.UUID
	Relation string
	// FromStep is the previous deployment's step a resume starts from (0-based).
	FromStep *int
	// Actor names the API token that asked; it is recorded in the event only.
	Actor string
}

// LinkDeployment links deployment id to the one it was made from and records a
// deployment.resumed_as or deployment.rerun_as event on the previous deployment's
// stream, in one transaction. Linking it again the same way changes nothing and
// reports linked = false; a deployment linked otherwise is ErrLinkConflict.
func LinkDeployment(ctx context.Context, db TxBeginner, id uuid.UUID, link DeploymentLink) (linked bool, err error) {
	var fromStep *int32
	if link.FromStep != nil {
		n := int32(*link.FromStep)
		fromStep = &n
	}
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		n, err := queries.LinkDeployment(ctx, tx, dbsqlc.LinkDeploymentParams{
			ID: id, PreviousDeploymentID: &link.Previous, Relation: &link.Relation, FromStep: fromStep,
		})
		if err != nil {
			return fmt.Errorf("linking deployment %s to %s: %w", id, link.Previous, err)
		}
		if n == 0 {
			return sameLink(ctx, tx, id, link)
		}
		linked = true
		typ := events.DeploymentRerunAs
		if link.Relation == RelationResume {
			typ = events.DeploymentResumedAs
		}
		return InsertEvent(ctx, tx, &link.Previous, typ, events.RelatedDeploymentData{
			NewDeploymentID: id.String(), Relation: link.Relation, FromStep: link.FromStep, Actor: link.Actor,
		})
	})
	return linked, err
}

// sameLink returns nil when deployment id is already linked as link says, and
// ErrLinkConflict when it is linked otherwise or not at all.
func sameLink(ctx context.Context, db DB, id uuid.UUID, link DeploymentLink) error {
	have, err := DeploymentLinkOf(ctx, db, id)
	if err != nil {
		return err
	}
	if have == nil || have.Previous != link.Previous || have.Relation != link.Relation ||
		(have.FromStep == nil) != (link.FromStep == nil) || (have.FromStep != nil && *have.FromStep != *link.FromStep) {
		return ErrLinkConflict
	}
	return nil
}

// DeploymentLinkOf returns how deployment id was made from another one, nil when it
// was not, or ErrNotFound.
func DeploymentLinkOf(ctx context.Context, db DB, id uuid.UUID) (*DeploymentLink, error) {
	row, err := queries.DeploymentLinkOf(ctx, db, id)
	if err != nil {
		return nil, notFound(err)
	}
	if row.PreviousDeploymentID == nil || row.Relation == nil {
		return nil, nil
	}
	link := &DeploymentLink{Previous: *row.PreviousDeploymentID, Relation: *row.Relation}
	if row.FromStep != nil {
		n := int(*row.FromStep)
		link.FromStep = &n
	}
	return link, nil
}

// withLink sets d's previous deployment, relation and from_step when it was made
// from another deployment.
func withLink(ctx context.Context, db DB, d *DeploymentView) error {
	link, err := DeploymentLinkOf(ctx, db, d.ID)
	if err != nil || link == nil {
		return err
	}
	d.PreviousDeploymentID = &link.Previous
	d.Relation = &link.Relation
	d.FromStep = link.FromStep
	return nil
}
