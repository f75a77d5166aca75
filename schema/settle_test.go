package schema_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

type settleBundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
}

func setupSettle(t *testing.T) settleBundle {
	t.Helper()
	return settleBundle{ctx: context.Background(), pool: testenv.MigratedPool(t)}
}

func (b settleBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err)
}

func (b settleBundle) register(t *testing.T, name string) uuid.UUID {
	t.Helper()
	id, err := schema.RegisterInstance(b.ctx, b.pool, schema.NewInstance{Name: name, Version: "test"})
	require.NoError(t, err)
	return id
}

func (b settleBundle) assigned(t *testing.T, target string) *uuid.UUID {
	t.Helper()
	var id *uuid.UUID
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT assigned_instance_id FROM targets WHERE name = $1`, target).Scan(&id))
	return id
}

func (b settleBundle) instanceStatus(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM thorax_instances WHERE id = $1`, id).Scan(&s))
	return s
}

// The only Thorax is marked dead while no other lives: its listen target is left
// unassigned. When a Thorax registers again, the target is its own at once.
func TestOnlyThoraxDeadThenReregisteredGetsItsListenTargetsBack(t *testing.T) {
	t.Parallel()
	b := setupSettle(t)
	first := b.register(t, "thorax-1")
	b.exec(t, `INSERT INTO targets (name, mode, address, assigned_instance_id) VALUES ('web-1', 'listen', '127.0.0.1:1', $1)`, first)
	b.exec(t, `UPDATE thorax_instances SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1`, first)

	dead, err := schema.MarkDeadInstances(b.ctx, b.pool, schema.DeathRules{Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Nil(t, dead[0].Reassigned["web-1"], "no live instance to take it")
	require.Nil(t, b.assigned(t, "web-1"))

	second := b.register(t, "thorax-1")
	got := b.assigned(t, "web-1")
	require.NotNil(t, got, "registration assigns unserved listen targets")
	require.Equal(t, second, *got)

	reply, err := schema.Heartbeat(b.ctx, b.pool, schema.HeartbeatRequest{Instance: second})
	require.NoError(t, err)
	require.Equal(t, []string{"web-1"}, reply.ListenTargets)
}

// A target assigned to a dead instance is picked up by the monitor's sweep as soon as
// an instance is live, even one that registered before the target was stranded.
func TestAssignListenTargetsMovesTargetsOffDeadAndDrainingInstances(t *testing.T) {
	t.Parallel()
	b := setupSettle(t)
	live := b.register(t, "live")
	gone := uuid.New()
	b.exec(t, `INSERT INTO thorax_instances (id, name, status) VALUES ($1, 'gone', 'dead')`, gone)
	b.exec(t, `INSERT INTO targets (name, mode, address, assigned_instance_id) VALUES ('web-1', 'listen', '127.0.0.1:1', $1)`, gone)
	b.exec(t, `INSERT INTO targets (name, mode, address) VALUES ('web-2', 'listen', '127.0.0.1:2')`)

	n, err := schema.AssignListenTargets(b.ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, live, *b.assigned(t, "web-1"))
	require.Equal(t, live, *b.assigned(t, "web-2"))

	// A draining instance hands its listen targets over at its next heartbeat.
	other := b.register(t, "other")
	_, err = schema.Heartbeat(b.ctx, b.pool, schema.HeartbeatRequest{Instance: live, Draining: true})
	require.NoError(t, err)
	require.Equal(t, other, *b.assigned(t, "web-1"))
	require.Equal(t, other, *b.assigned(t, "web-2"))
	var events int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM deployment_events WHERE type = 'target.reassigned'`).Scan(&events))
	require.Equal(t, 4, events)
}

// An instance heartbeating through a replica that recovered less than a timeout ago,
// or that is stalled but not gone, is not declared dead; through a replica healthy
// for a whole timeout, or one that is gone, it is.
func TestSilentInstanceIsSparedWhileItsReplicaCouldNotServeIt(t *testing.T) {
	t.Parallel()
	b := setupSettle(t)
	rules := schema.DeathRules{Timeout: 10 * time.Second, ReplicaGoneAfter: time.Minute}
	id := b.register(t, "thorax-1")
	_, err := schema.Heartbeat(b.ctx, b.pool, schema.HeartbeatRequest{Instance: id, Replica: "r1"})
	require.NoError(t, err)
	b.exec(t, `UPDATE thorax_instances SET last_heartbeat_at = now() - interval '30 seconds' WHERE id = $1`, id)

	judge := func() int {
		dead, err := schema.MarkDeadInstances(b.ctx, b.pool, rules)
		require.NoError(t, err)
		return len(dead)
	}
	// The replica just recovered.
	require.NoError(t, schema.RecordReplicaHeartbeat(b.ctx, b.pool, "r1", true))
	require.Zero(t, judge(), "the replica recovered 0 s ago")
	// The replica is stalled: silent 20 s, not gone.
	b.exec(t, `UPDATE mandible_replicas SET healthy_since = now() - interval '1 hour', last_seen_at = now() - interval '20 seconds'`)
	require.Zero(t, judge(), "the replica is stalled, not gone")
	// A verdict refused before commit leaves the instance live.
	b.exec(t, `UPDATE mandible_replicas SET last_seen_at = now()`)
	refuse := errors.New("stalled")
	_, err = schema.MarkDeadInstances(b.ctx, b.pool, schema.DeathRules{Timeout: rules.Timeout, BeforeCommit: func() error { return refuse }})
	require.ErrorIs(t, err, refuse)
	require.Equal(t, "live", b.instanceStatus(t, id))
	// Healthy for an hour and seen now: the instance had its chance.
	require.Equal(t, 1, judge())
	require.Equal(t, "dead", b.instanceStatus(t, id))

	// Through a gone replica, the rule applies as well.
	other := b.register(t, "thorax-2")
	_, err = schema.Heartbeat(b.ctx, b.pool, schema.HeartbeatRequest{Instance: other, Replica: "r2"})
	require.NoError(t, err)
	require.NoError(t, schema.RecordReplicaHeartbeat(b.ctx, b.pool, "r2", true))
	b.exec(t, `UPDATE mandible_replicas SET last_seen_at = now() - interval '2 minutes' WHERE id = 'r2'`)
	b.exec(t, `UPDATE thorax_instances SET last_heartbeat_at = now() - interval '2 minutes' WHERE id = $1`, other)
	require.Equal(t, 1, judge())
}

// A command running grace past its timeout is failed with the reason, and its
// deployment hears of it as a target.failed event; one within the grace is not.
func TestOverdueCommandsAreFailedWithTheReason(t *testing.T) {
	t.Parallel()
	b := setupSettle(t)
	instance := b.register(t, "thorax-1")
	b.exec(t, `INSERT INTO targets (name, mode, assigned_instance_id) VALUES ('web-1', 'poll', $1)`, instance)
	deployment := uuid.New()
	b.exec(t, `INSERT INTO deployments (id, name, priority, status, spec) VALUES ($1, 'd', 'normal', 'running', '{}')`, deployment)
	step := 0
	reqs, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{
		{IdempotencyKey: "late", Target: "web-1", Command: "sleep 1000", Priority: "normal", Timeout: time.Minute, DeploymentID: &deployment, StepPosition: &step},
		{IdempotencyKey: "fresh", Target: "web-1", Command: "sleep 1000", Priority: "normal", Timeout: time.Minute, DeploymentID: &deployment, StepPosition: &step},
	})
	require.NoError(t, err)
	ids := make([]uuid.UUID, 2)
	for i, r := range reqs {
		require.NoError(t, b.pool.QueryRow(b.ctx, `
			INSERT INTO command_queue (dispatch_request_id, dispatch_attempt, target_id, deployment_id, step_position, command, timeout, priority, mode,
			                           status, holder_instance_id, lease_epoch, claimed_at)
			SELECT id, 0, target_id, deployment_id, step_position, command, timeout, priority, 'poll', 'running', $2, 1,
			       now() - CASE WHEN idempotency_key = 'late' THEN interval '3 minutes' ELSE interval '61 seconds' END
			FROM pending_dispatch_requests WHERE id = $1 RETURNING id`, r.ID, instance).Scan(&ids[i]))
	}

	failed, err := schema.FailOverdueCommands(b.ctx, b.pool, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[0]}, failed)
	var status, reason string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status, error FROM command_queue WHERE id = $1`, ids[0]).Scan(&status, &reason))
	require.Equal(t, "failed", status)
	require.Contains(t, reason, schema.OverdueReason)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM command_queue WHERE id = $1`, ids[1]).Scan(&status))
	require.Equal(t, "running", status, "within timeout + grace")
	var events int
	require.NoError(t, b.pool.QueryRow(b.ctx, `
		SELECT count(*) FROM deployment_events WHERE deployment_id = $1 AND type = 'target.failed' AND data->>'command_id' = $2`,
		deployment, ids[0].String()).Scan(&events))
	require.Equal(t, 1, events)
}

// A gone replica is listed once silent past the threshold, and recording its end is
// fenced: a replica that beats again in the meantime is left alone.
func TestGoneReplicasAndTheirEnd(t *testing.T) {
	t.Parallel()
	b := setupSettle(t)
	require.NoError(t, schema.RecordReplicaHeartbeat(b.ctx, b.pool, "me", true))
	require.NoError(t, schema.RecordReplicaHeartbeat(b.ctx, b.pool, "quiet", true))
	require.NoError(t, schema.RecordReplicaHeartbeat(b.ctx, b.pool, "back", true))
	b.exec(t, `UPDATE mandible_replicas SET last_seen_at = now() - interval '10 minutes' WHERE id <> 'me'`)

	gone, err := schema.GoneReplicas(b.ctx, b.pool, "me", 150*time.Second)
	require.NoError(t, err)
	require.Len(t, gone, 2)

	require.NoError(t, schema.RecordReplicaHeartbeat(b.ctx, b.pool, "back", false))
	ended, err := schema.EndReplica(b.ctx, b.pool, "back", "me", "test", 150*time.Second)
	require.NoError(t, err)
	require.False(t, ended, "it came back")
	ended, err = schema.EndReplica(b.ctx, b.pool, "quiet", "me", "test", 150*time.Second)
	require.NoError(t, err)
	require.True(t, ended)
	gone, err = schema.GoneReplicas(b.ctx, b.pool, "me", 150*time.Second)
	require.NoError(t, err)
	require.Empty(t, gone)
}
