package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// What Mandible settles when nobody reports: listen targets left without a live
// instance, commands running past their timeout, and deployments failed outside their
// workflow.

// AssignListenTargets gives every listen-mode target that no live instance serves
// (unassigned, or assigned to an instance that is dead or draining) to the live
// instance with the fewest targets, one by one, with a target.reassigned event each.
// Targets stay as they are while no instance is live. It returns how many moved.
func AssignListenTargets(ctx context.Context, db DB) (int, error) {
	rows, err := db.Query(ctx, `
		SELECT t.id, t.name, t.assigned_instance_id FROM targets t
		LEFT JOIN thorax_instances i ON i.id = t.assigned_instance_id
		WHERE t.mode = 'listen' AND t.deregistered_at IS NULL AND (i.id IS NULL OR i.status <> 'live')
		ORDER BY t.name`)
	if err != nil {
		return 0, fmt.Errorf("listing unserved listen targets: %w", err)
	}
	type unserved struct {
		ID   uuid.UUID
		Name string
		From *uuid.UUID
	}
	targets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[unserved])
	if err != nil {
		return 0, fmt.Errorf("listing unserved listen targets: %w", err)
	}
	moved := 0
	for _, t := range targets {
		var to uuid.UUID
		// The re-check in the WHERE clause makes a concurrent assignment win once.
		err := db.QueryRow(ctx, `
			UPDATE targets SET assigned_instance_id = pick.id, updated_at = now()
			FROM (SELECT i.id FROM thorax_instances i
			      LEFT JOIN targets o ON o.assigned_instance_id = i.id AND o.deregistered_at IS NULL
			      WHERE i.status = 'live'
			      GROUP BY i.id ORDER BY count(o.id), i.id LIMIT 1) AS pick
			WHERE targets.id = $1 AND targets.assigned_instance_id IS NOT DISTINCT FROM $2
			RETURNING pick.id`, t.ID, t.From).Scan(&to)
		if err != nil {
			if notFound(err) == ErrNotFound {
				continue // no live instance, or assigned meanwhile
			}
			return moved, fmt.Errorf("assigning listen target %s: %w", t.Name, err)
		}
		moved++
		if err := InsertEvent(ctx, db, nil, "target.reassigned", map[string]any{
			"target": t.Name, "from_instance_id": t.From, "to_instance_id": to, "reason": "no live thorax instance served the target",
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
	rows, err := db.Query(ctx, `
		WITH overdue AS (
		    UPDATE command_queue c
		    SET status = 'failed', finished_at = now(),
		        error = format('%s (timeout %s, grace %s)', $2::text, c.timeout, make_interval(secs => $1))
		    FROM targets t
		    WHERE c.status = 'running' AND t.id = c.target_id
		      AND c.claimed_at < now() - c.timeout - make_interval(secs => $1)
		    RETURNING c.id, c.deployment_id, c.step_position, t.name, c.error
		), events AS (
		    INSERT INTO deployment_events (deployment_id, type, data)
		    SELECT o.deployment_id, 'target.failed',
		           jsonb_build_object('step_position', o.step_position, 'target', o.name, 'command_id', o.id, 'error', o.error)
		    FROM overdue o WHERE o.deployment_id IS NOT NULL
		)
		SELECT id FROM overdue`, grace.Seconds(), OverdueReason)
	if err != nil {
		return nil, fmt.Errorf("failing overdue commands: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
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

func addWorkflowNotice(ctx context.Context, db DB, deployment uuid.UUID, reason string) error {
	if _, err := db.Exec(ctx, `
		INSERT INTO deployment_workflow_notices (deployment_id, reason) VALUES ($1, $2)
		ON CONFLICT (deployment_id) DO NOTHING`, deployment, reason); err != nil {
		return fmt.Errorf("recording workflow notice for deployment %s: %w", deployment, err)
	}
	return nil
}

// WorkflowNotices returns up to limit notices, oldest first, counting an attempt on
// each. Replicas may deliver the same notice at once: telling a workflow twice is
// harmless.
func WorkflowNotices(ctx context.Context, db DB, limit int) ([]WorkflowNotice, error) {
	rows, err := db.Query(ctx, `
		UPDATE deployment_workflow_notices n SET attempts = n.attempts + 1
		FROM (SELECT deployment_id FROM deployment_workflow_notices ORDER BY created_at LIMIT $1
		      FOR UPDATE SKIP LOCKED) AS due
		WHERE n.deployment_id = due.deployment_id
		RETURNING n.deployment_id, n.reason, n.attempts`, limit)
	if err != nil {
		return nil, fmt.Errorf("reading workflow notices: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[WorkflowNotice])
	if err != nil {
		return nil, fmt.Errorf("reading workflow notices: %w", err)
	}
	return out, nil
}

// DeleteWorkflowNotice removes a notice once its workflow was told.
func DeleteWorkflowNotice(ctx context.Context, db DB, deployment uuid.UUID) error {
	if _, err := db.Exec(ctx, `DELETE FROM deployment_workflow_notices WHERE deployment_id = $1`, deployment); err != nil {
		return fmt.Errorf("deleting workflow notice for deployment %s: %w", deployment, err)
	}
	return nil
}
