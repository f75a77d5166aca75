package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RegisterInstance records a starting Thorax instance and returns the id Mandible
// issues for it.
func RegisterInstance(ctx context.Context, db TxBeginner, name, version string) (uuid.UUID, error) {
	id := uuid.Must(uuid.NewV7())
	if _, err := db.Exec(ctx, `INSERT INTO thorax_instances (id, name, version) VALUES ($1, $2, $3)`, id, name, version); err != nil {
		return uuid.Nil, fmt.Errorf("registering thorax instance %s: %w", name, err)
	}
	// Listen targets that no live instance serves (their Thorax died while no other
	// was live) are this one's now: a target is never stranded.
	if _, err := AssignListenTargets(ctx, db); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

// HeartbeatReply is what Mandible tells a Thorax instance on each heartbeat.
type HeartbeatReply struct {
	// ListenTargets are the listen-mode targets assigned to the instance.
	ListenTargets []string
	// Cancelled are commands the instance holds whose deployment was cancelled.
	Cancelled []uuid.UUID
}

// HeartbeatRequest is one heartbeat of a Thorax instance.
type HeartbeatRequest struct {
	Instance uuid.UUID
	// Replica is the Mandible replica that received the heartbeat.
	Replica     string
	PollTargets []string
	Draining    bool
}

// Heartbeat keeps instance live (or draining) and records the poll-mode targets whose
// agents poll it: unknown ones are registered as poll-mode targets, known ones move to
// this instance. A draining instance's listen targets move to a live instance at once,
// so their next commands do not wait for the drain. It returns ErrInstanceDead for an
// instance that must register again.
func Heartbeat(ctx context.Context, db TxBeginner, r HeartbeatRequest) (HeartbeatReply, error) {
	instance, pollTargets, draining := r.Instance, r.PollTargets, r.Draining
	tx, err := db.Begin(ctx)
	if err != nil {
		return HeartbeatReply{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	status := "live"
	if draining {
		status = "draining"
	}
	tag, err := tx.Exec(ctx, `
		UPDATE thorax_instances SET last_heartbeat_at = now(), status = $2, heartbeat_replica = nullif($3, '')
		WHERE id = $1 AND status <> 'dead'`, instance, status, r.Replica)
	if err != nil {
		return HeartbeatReply{}, fmt.Errorf("recording heartbeat: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return HeartbeatReply{}, ErrInstanceDead
	}
	if len(pollTargets) > 0 {
		for _, name := range pollTargets {
			if !targetName.MatchString(name) {
				return HeartbeatReply{}, &InputError{Problems: []string{fmt.Sprintf("poll_targets: %q is not a valid target name", name)}}
			}
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO targets (name, mode, assigned_instance_id)
			SELECT n, 'poll', $1 FROM unnest($2::text[]) AS n
			ON CONFLICT (name) DO UPDATE SET assigned_instance_id = $1, updated_at = now()
			WHERE targets.mode = 'poll' AND targets.deregistered_at IS NULL
			  AND targets.assigned_instance_id IS DISTINCT FROM $1`, instance, pollTargets); err != nil {
			return HeartbeatReply{}, fmt.Errorf("recording poll targets: %w", err)
		}
	}
	if draining {
		if _, err := AssignListenTargets(ctx, tx); err != nil {
			return HeartbeatReply{}, err
		}
	}
	var reply HeartbeatReply
	rows, err := tx.Query(ctx, `
		SELECT name FROM targets WHERE assigned_instance_id = $1 AND mode = 'listen' AND deregistered_at IS NULL ORDER BY name`, instance)
	if err != nil {
		return HeartbeatReply{}, err
	}
	if reply.ListenTargets, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return HeartbeatReply{}, err
	}
	rows, err = tx.Query(ctx, `
		SELECT id FROM command_queue
		WHERE holder_instance_id = $1 AND status = 'cancelled' AND finished_at > now() - interval '10 minutes'`, instance)
	if err != nil {
		return HeartbeatReply{}, err
	}
	if reply.Cancelled, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
		return HeartbeatReply{}, err
	}
	return reply, tx.Commit(ctx)
}

// DeadInstance is an instance marked dead for missing heartbeats, and what followed.
type DeadInstance struct {
	ID   uuid.UUID `json:"id"`
	Name string    `json:"name"`
	// Reassigned maps each of its listen-mode targets to the live instance that took
	// it over (nil when no instance is live).
	Reassigned map[string]*uuid.UUID `json:"reassigned"`
	// LostCommands were running on it; their requests and deployments are failed.
	LostCommands      []uuid.UUID `json:"lost_commands"`
	FailedDeployments []uuid.UUID `json:"failed_deployments"`
}

// DeathRules say when a silent Thorax instance is dead.
type DeathRules struct {
	// Timeout is the heartbeat silence after which an instance is dead.
	Timeout time.Duration
	// ReplicaGoneAfter is the silence after which a Mandible replica is gone. An
	// instance whose latest heartbeat went through a replica that is stalled or
	// stopped but not gone, or that recovered less than Timeout ago, is spared: it has
	// not had a full Timeout in which it could reach a working Mandible.
	ReplicaGoneAfter time.Duration
	// BeforeCommit, when set, runs before each verdict commits; an error rolls the
	// verdict back. The monitor refuses a verdict reached across a stall of its own.
	BeforeCommit func() error
}

// MarkDeadInstances marks instances silent for longer than the rules allow as dead,
// in one transaction per instance: their listen-mode targets are reassigned to the
// live instance with the fewest targets, the commands running on them are lost, and
// the dispatch requests and deployments those belonged to are failed — not retried
// (seed: Thorax failure is handled separately) — with a notice for each deployment's
// workflow. Events record the reassignments and failures. Safe to run from every
// replica.
func MarkDeadInstances(ctx context.Context, db TxBeginner, rules DeathRules) ([]DeadInstance, error) {
	var out []DeadInstance
	for {
		d, ok, err := markOneDead(ctx, db, rules)
		if err != nil || !ok {
			return out, err
		}
		out = append(out, d)
	}
}

func markOneDead(ctx context.Context, db TxBeginner, rules DeathRules) (DeadInstance, bool, error) {
	timeout := rules.Timeout
	goneAfter := max(rules.ReplicaGoneAfter, timeout)
	tx, err := db.Begin(ctx)
	if err != nil {
		return DeadInstance{}, false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	d := DeadInstance{Reassigned: map[string]*uuid.UUID{}}
	// The instance's serving replica spares it while that replica is neither gone
	// nor fresh and healthy for a whole timeout.
	err = tx.QueryRow(ctx, `
		UPDATE thorax_instances SET status = 'dead', died_at = now()
		WHERE id = (SELECT i.id FROM thorax_instances i
		            LEFT JOIN mandible_replicas r ON r.id = i.heartbeat_replica
		            WHERE i.status <> 'dead' AND i.last_heartbeat_at < now() - make_interval(secs => $1)
		              AND NOT coalesce(r.ended_at IS NULL AND r.last_seen_at >= now() - make_interval(secs => $2)
		                               AND NOT (r.stopped_at IS NULL AND r.last_seen_at >= now() - make_interval(secs => $1)
		                                        AND r.healthy_since <= now() - make_interval(secs => $1)), false)
		            ORDER BY i.last_heartbeat_at LIMIT 1 FOR UPDATE OF i SKIP LOCKED)
		RETURNING id, name`, timeout.Seconds(), goneAfter.Seconds()).Scan(&d.ID, &d.Name)
	if err != nil {
		if notFound(err) == ErrNotFound {
			return DeadInstance{}, false, nil
		}
		return DeadInstance{}, false, fmt.Errorf("marking dead instances: %w", err)
	}

	// Reassign listen-mode targets one by one, each to the least-loaded live instance.
	rows, err := tx.Query(ctx, `SELECT id, name FROM targets WHERE assigned_instance_id = $1 AND mode = 'listen' ORDER BY name FOR UPDATE`, d.ID)
	if err != nil {
		return DeadInstance{}, false, err
	}
	type tgt struct {
		id   uuid.UUID
		name string
	}
	var listen []tgt
	for rows.Next() {
		var t tgt
		if err := rows.Scan(&t.id, &t.name); err != nil {
			rows.Close()
			return DeadInstance{}, false, err
		}
		listen = append(listen, t)
	}
	rows.Close()
	for _, t := range listen {
		var to *uuid.UUID
		err := tx.QueryRow(ctx, `
			UPDATE targets SET assigned_instance_id = (
			    SELECT i.id FROM thorax_instances i
			    LEFT JOIN targets t ON t.assigned_instance_id = i.id AND t.deregistered_at IS NULL
			    WHERE i.status = 'live' AND i.last_heartbeat_at > now() - make_interval(secs => $2)
			    GROUP BY i.id ORDER BY count(t.id), i.id LIMIT 1),
			    updated_at = now()
			WHERE id = $1
			RETURNING assigned_instance_id`, t.id, timeout.Seconds()).Scan(&to)
		if err != nil {
			return DeadInstance{}, false, fmt.Errorf("reassigning target %s: %w", t.name, err)
		}
		d.Reassigned[t.name] = to
		if err := InsertEvent(ctx, tx, nil, "target.reassigned", map[string]any{
			"target": t.name, "from_instance_id": d.ID, "to_instance_id": to, "reason": "thorax instance " + d.Name + " stopped heartbeating",
		}); err != nil {
			return DeadInstance{}, false, err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE targets SET assigned_instance_id = NULL, updated_at = now() WHERE assigned_instance_id = $1 AND mode = 'poll'`, d.ID); err != nil {
		return DeadInstance{}, false, err
	}

	reason := fmt.Sprintf("thorax instance %s (%s) stopped heartbeating while running the command", d.Name, d.ID)
	rows, err = tx.Query(ctx, `
		WITH lost AS (
		    UPDATE command_queue SET status = 'lost', finished_at = now(), error = $2
		    WHERE holder_instance_id = $1 AND status = 'running'
		    RETURNING id, dispatch_request_id, deployment_id
		), failed_requests AS (
		    UPDATE pending_dispatch_requests p SET status = 'failed', finished_at = now(), last_error = $2
		    FROM lost WHERE p.id = lost.dispatch_request_id AND p.status = 'dispatched'
		)
		SELECT id, deployment_id FROM lost`, d.ID, reason)
	if err != nil {
		return DeadInstance{}, false, fmt.Errorf("failing commands of dead instance: %w", err)
	}
	deployments := map[uuid.UUID]bool{}
	for rows.Next() {
		var cmd uuid.UUID
		var dep *uuid.UUID
		if err := rows.Scan(&cmd, &dep); err != nil {
			rows.Close()
			return DeadInstance{}, false, err
		}
		d.LostCommands = append(d.LostCommands, cmd)
		if dep != nil {
			deployments[*dep] = true
		}
	}
	rows.Close()
	for dep := range deployments {
		tag, err := tx.Exec(ctx, `
			UPDATE deployments SET status = 'failed', finished_at = now(), error = $2
			WHERE id = $1 AND status IN ('pending', 'running')`, dep, "thorax instance "+d.Name+" failed with commands in flight")
		if err != nil {
			return DeadInstance{}, false, err
		}
		if tag.RowsAffected() == 0 {
			continue
		}
		d.FailedDeployments = append(d.FailedDeployments, dep)
		why := "thorax instance " + d.Name + " failed with commands in flight; not retried"
		if err := InsertEvent(ctx, tx, &dep, "deployment.failed", map[string]any{
			"deployment_id": dep, "reason": why, "instance_id": d.ID,
		}); err != nil {
			return DeadInstance{}, false, err
		}
		if err := addWorkflowNotice(ctx, tx, dep, why); err != nil {
			return DeadInstance{}, false, err
		}
	}
	if rules.BeforeCommit != nil {
		if err := rules.BeforeCommit(); err != nil {
			return DeadInstance{}, false, err
		}
	}
	return d, true, tx.Commit(ctx)
}
