package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// What Mandible settles when nobody reports: listen targets left without a live
// instance, commands running past their timeout, and deployments failed outside their
// workflow.

// AssignListenTargets gives every listen-mode target that no live instance serves
// (unassigned, or assigned to an instance that is dead or draining) to the live
// instance with the fewest targets, one by one, with a target.reassigned event each.
// Targets stay as they are while no instance is live. It returns how many moved.
func AssignListenTargets(ctx context.Context, db DB) (int, error) {
	targets, err := queries.UnservedListenTargets(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("listing unserved listen targets: %w", err)
	}
	moved := 0
	for _, t := range targets {
		to, err := queries.AssignListenTarget(ctx, db, dbsqlc.AssignListenTargetParams{TargetID: t.ID, FromInstanceID: t.AssignedInstanceID})
		if errors.Is(notFound(err), ErrNotFound) {
			continue // no live instance, or assigned meanwhile
		}
		if err != nil {
			return moved, fmt.Errorf("assigning listen target %s: %w", t.Name, err)
		}
		moved++
		if err := InsertEvent(ctx, db, nil, string(events.TargetReassigned), events.TargetReassignedData{
			Target: t.Name, FromInstanceID: t.AssignedInstanceID, ToInstanceID: &to, Reason: "no live thorax instance served the target",
		}); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// OverdueReason is the error of a command failed for running past its timeout plus
// the grace without a result.
const OverdueReason = "no result within timeout + grace"

// FailOverdueCommands fails commands still running grace past their timeout (counted
// from their claim): their holder is alive but no result came, and none will be
// waited for. Each gets a target.failed event, which the deployment's workflow reads
// like any result. It returns the commands it failed.
func FailOverdueCommands(ctx context.Context, db DB, grace time.Duration) ([]uuid.UUID, error) {
	ids, err := queries.FailOverdueCommands(ctx, db, dbsqlc.FailOverdueCommandsParams{Reason: OverdueReason, Grace: grace})
	if err != nil {
		return nil, fmt.Errorf("failing overdue commands: %w", err)
	}
	return ids, nil
}

// WorkflowNotice is a deployment failed outside its workflow, whose workflow has not
// been told yet.
type WorkflowNotice struct {
	DeploymentID uuid.UUID
	Reason       string
	Attempts     int
}

// addWorkflowNotice records that deployment's workflow must be told it failed.
func addWorkflowNotice(ctx context.Context, db DB, deployment uuid.UUID, reason string) error {
	if err := queries.AddWorkflowNotice(ctx, db, dbsqlc.AddWorkflowNoticeParams{DeploymentID: deployment, Reason: reason}); err != nil {
		return fmt.Errorf("recording workflow notice for deployment %s: %w", deployment, err)
	}
	return nil
}

// WorkflowNotices returns up to limit notices, oldest first, counting an attempt on
// each. Replicas may deliver the same notice at once: telling a workflow twice is
// harmless.
func WorkflowNotices(ctx context.Context, db DB, limit int) ([]WorkflowNotice, error) {
	rows, err := queries.TakeWorkflowNotices(ctx, db, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("reading workflow notices: %w", err)
	}
	out := make([]WorkflowNotice, len(rows))
	for i, r := range rows {
		out[i] = WorkflowNotice{DeploymentID: r.DeploymentID, Reason: r.Reason, Attempts: int(r.Attempts)}
	}
	return out, nil
}

// DeleteWorkflowNotice removes a notice once its workflow was told.
func DeleteWorkflowNotice(ctx context.Context, db DB, deployment uuid.UUID) error {
	if err := queries.DeleteWorkflowNotice(ctx, db, deployment); err != nil {
		return fmt.Errorf("deleting workflow notice for deployment %s: %w", deployment, err)
	}
	return nil
}
