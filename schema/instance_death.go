package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// What follows a Thorax instance's death (seed: Thorax failure is handled separately):
// its targets move, its commands are lost, and their deployments fail.

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

// markOneDead marks the longest-silent instance dead, if the rules allow, and settles
// what it held, in one transaction. ok is false when no instance is due.
func markOneDead(ctx context.Context, db TxBeginner, rules DeathRules) (DeadInstance, bool, error) {
	var d DeadInstance
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		row, err := queries.MarkOneInstanceDead(ctx, tx, dbsqlc.MarkOneInstanceDeadParams{
			Timeout: rules.Timeout, GoneAfter: max(rules.ReplicaGoneAfter, rules.Timeout),
		})
		if err != nil {
			return err
		}
		d = DeadInstance{ID: row.ID, Name: row.Name, Reassigned: map[string]*uuid.UUID{}}
		if err := reassignTargetsOf(ctx, tx, &d, rules.Timeout); err != nil {
			return err
		}
		if err := loseCommandsOf(ctx, tx, &d); err != nil {
			return err
		}
		if rules.BeforeCommit != nil {
			return rules.BeforeCommit()
		}
		return nil
	})
	if errors.Is(notFound(err), ErrNotFound) {
		return DeadInstance{}, false, nil
	}
	if err != nil {
		return DeadInstance{}, false, fmt.Errorf("marking dead instances: %w", err)
	}
	return d, true, nil
}

// reassignTargetsOf moves the dead instance's listen-mode targets one by one, each to
// the least-loaded live instance (none when no instance heartbeat within timeout), and
// frees its poll-mode targets.
func reassignTargetsOf(ctx context.Context, tx pgx.Tx, d *DeadInstance, timeout time.Duration) error {
	listen, err := queries.LockListenTargetsOf(ctx, tx, d.ID)
	if err != nil {
		return fmt.Errorf("listing listen targets of %s: %w", d.Name, err)
	}
	for _, t := range listen {
		to, err := queries.ReassignListenTarget(ctx, tx, dbsqlc.ReassignListenTargetParams{TargetID: t.ID, Timeout: timeout})
		if err != nil {
			return fmt.Errorf("reassigning target %s: %w", t.Name, err)
		}
		d.Reassigned[t.Name] = to
		from := d.ID
		if err := InsertEvent(ctx, tx, nil, string(events.TargetReassigned), events.TargetReassignedData{
			Target: t.Name, FromInstanceID: &from, ToInstanceID: to, Reason: "thorax instance " + d.Name + " stopped heartbeating",
		}); err != nil {
			return err
		}
	}
	if err := queries.UnassignPollTargets(ctx, tx, d.ID); err != nil {
		return fmt.Errorf("freeing poll targets of %s: %w", d.Name, err)
	}
	return nil
}

// loseCommandsOf marks the commands running on the dead instance lost, fails their
// dispatch requests, and fails each unfinished deployment they belonged to, with an
// event and a notice for its workflow.
func loseCommandsOf(ctx context.Context, tx pgx.Tx, d *DeadInstance) error {
	reason := fmt.Sprintf("thorax instance %s (%s) stopped heartbeating while running the command", d.Name, d.ID)
	lost, err := queries.LoseCommandsOf(ctx, tx, dbsqlc.LoseCommandsOfParams{InstanceID: d.ID, Reason: reason})
	if err != nil {
		return fmt.Errorf("failing commands of dead instance: %w", err)
	}
	deployments := map[uuid.UUID]bool{}
	for _, c := range lost {
		d.LostCommands = append(d.LostCommands, c.ID)
		if c.DeploymentID != nil {
			deployments[*c.DeploymentID] = true
		}
	}
	for dep := range deployments {
		n, err := queries.FailUnfinishedDeployment(ctx, tx, dbsqlc.FailUnfinishedDeploymentParams{
			ID: dep, Reason: "thorax instance " + d.Name + " failed with commands in flight",
		})
		if err != nil {
			return fmt.Errorf("failing deployment %s: %w", dep, err)
		}
		if n == 0 {
			continue
		}
		d.FailedDeployments = append(d.FailedDeployments, dep)
		why := "thorax instance " + d.Name + " failed with commands in flight; not retried"
		if err := InsertEvent(ctx, tx, &dep, string(events.DeploymentFailed), events.DeploymentEndedData{
			DeploymentID: dep, Reason: why, InstanceID: d.ID,
		}); err != nil {
			return err
		}
		if err := addWorkflowNotice(ctx, tx, dep, why); err != nil {
			return err
		}
	}
	return nil
}
