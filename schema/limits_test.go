package schema_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// addLabelledTarget registers a poll target with labels on the bundle's instance.
func (b dispatchBundle) addLabelledTarget(t testing.TB, name, labels string) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO targets (name, mode, assigned_instance_id, labels) VALUES ($1, 'poll', $2, $3)`,
		name, b.instance, labels)
	require.NoError(t, err)
}

// deployment records a running deployment and returns its id.
func (b dispatchBundle) deployment(t *testing.T, name string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO deployments (id, name, priority, status, spec) VALUES ($1, $2, 'normal', 'running', '{}')`, id, name)
	require.NoError(t, err)
	return id
}

// endCommands ends every command of the requests: what a stored result does.
func (b dispatchBundle) endCommands(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `UPDATE command_queue SET status = 'succeeded', finished_at = now() WHERE dispatch_request_id = ANY($1)`, ids)
	require.NoError(t, err)
}

func (b dispatchBundle) view(t *testing.T, id uuid.UUID) schema.DispatchRequestView {
	t.Helper()
	v, err := schema.DispatchRequestByID(b.ctx, b.pool, id, time.Hour)
	require.NoError(t, err)
	return v
}

func claimedIDs(res schema.ClaimResult) []uuid.UUID {
	out := make([]uuid.UUID, len(res.Claimed))
	for i, c := range res.Claimed {
		out[i] = c.ID
	}
	return out
}

// Two deployments on one target: the per-target default (one running command)
// holds the second deployment's request back, through the claim, the delivery and
// the run of the first, and lets it go once the first command ends.
func TestPerTargetDefaultHoldsAcrossDeployments(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "db-1")
	d1, d2 := b.deployment(t, "d1"), b.deployment(t, "d2")
	step := 0
	first := b.enqueue(t, schema.NewDispatchRequest{IdempotencyKey: "d1", Target: "db-1", Command: "true", Priority: "normal", DeploymentID: &d1, StepPosition: &step})
	second := b.enqueue(t, schema.NewDispatchRequest{IdempotencyKey: "d2", Target: "db-1", Command: "true", Priority: "high", DeploymentID: &d2, StepPosition: &step})

	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{second[0].ID}, claimedIDs(claim), "one command at a time on db-1: the high-priority request only")
	held := b.view(t, first[0].ID)
	require.Equal(t, domain.StatusPending, held.Status)
	require.Equal(t, domain.DefaultTargetLimit, held.HeldBy)
	require.Contains(t, held.Reason, "held by concurrency limit "+domain.DefaultTargetLimit)
	require.Empty(t, b.view(t, second[0].ID).HeldBy, "a claimed request is not held")

	_, err = schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	for range 3 {
		again, err := schema.ClaimPending(b.ctx, b.pool, "replica-b", 10)
		require.NoError(t, err)
		require.Empty(t, again.Claimed, "the first command is queued or running: still held, by any replica")
	}
	v := b.view(t, first[0].ID)
	require.Equal(t, domain.DefaultTargetLimit, v.HeldBy)
	require.Zero(t, v.Attempts, "a held request spends no attempt")

	b.endCommands(t, second[0].ID)
	require.Empty(t, b.view(t, first[0].ID).HeldBy, "released once the command ended")
	released, err := schema.ClaimPending(b.ctx, b.pool, "replica-b", 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{first[0].ID}, claimedIDs(released))
}

// A label limit of 2 over five env=prod targets lets two of them run, whatever the
// batch; a target outside the label is not held; raising the limit frees more.
func TestLabelLimitHoldsFiveProdTargetsToTwo(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	var prod []uuid.UUID
	for i := range 5 {
		name := fmt.Sprintf("prod-%d", i)
		b.addLabelledTarget(t, name, `{"env":"prod"}`)
		prod = append(prod, b.enqueue(t, req(name, name, "normal"))[0].ID)
	}
	b.addLabelledTarget(t, "stage-1", `{"env":"staging"}`)
	stage := b.enqueue(t, req("stage", "stage-1", "low"))[0].ID
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "prod-two", Scope: domain.LimitScopeLabel, Label: "env", Value: "prod", MaxRunning: 2}, "test")
	require.NoError(t, err)

	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 100)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{prod[0], prod[1], stage}, claimedIDs(claim), "two prod targets, oldest first, and the staging one")
	for _, id := range prod[2:] {
		v := b.view(t, id)
		require.Equal(t, "prod-two", v.HeldBy)
		require.Equal(t, domain.StatusPending, v.Status)
	}
	list, err := schema.ListDispatchRequests(b.ctx, b.pool, schema.DispatchRequestFilter{Statuses: []string{domain.StatusPending}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, list, 3)
	for _, v := range list {
		require.Equal(t, "prod-two", v.HeldBy, "the list shows held_by too")
	}

	_, err = schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "prod-two", Scope: domain.LimitScopeLabel, Label: "env", Value: "prod", MaxRunning: 3}, "test")
	require.NoError(t, err)
	more, err := schema.ClaimPending(b.ctx, b.pool, replica, 100)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{prod[2]}, claimedIDs(more), "a raised limit lets one more go")
}

// A held request still expires 24 h after creation, with no attempt spent.
func TestHeldRequestStillExpires(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	running := b.enqueue(t, req("running", "web-1", "high"))[0].ID
	held := b.enqueue(t, req("held", "web-1", "normal"))[0].ID
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{running}, claimedIDs(claim))
	require.Equal(t, domain.DefaultTargetLimit, b.view(t, held).HeldBy)

	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET created_at = now() - interval '25 hours', expires_at = now() - interval '1 hour' WHERE id = $1`, held)
	require.NoError(t, err)
	expired, err := schema.ExpireRequests(b.ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{held}, expired)
	status, attempts, _ := b.status(t, held)
	require.Equal(t, domain.StatusExpired, status)
	require.Zero(t, attempts)
}

// A target's own limit overrides the default, and a changed default applies to
// every target.
func TestTargetLimitsOverrideTheDefault(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "big-1", "small-1")
	for i := range 4 {
		b.enqueue(t, req(fmt.Sprintf("big%d", i), "big-1", "normal"), req(fmt.Sprintf("small%d", i), "small-1", "normal"))
	}
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "big-1-three", Scope: domain.LimitScopeTarget, Value: "big-1", MaxRunning: 3}, "test")
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 100)
	require.NoError(t, err)
	perTarget := map[string]int{}
	for _, c := range claim.Claimed {
		perTarget[c.Target]++
	}
	require.Equal(t, map[string]int{"big-1": 3, "small-1": 1}, perTarget)

	_, err = schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 2}, "test")
	require.NoError(t, err)
	more, err := schema.ClaimPending(b.ctx, b.pool, replica, 100)
	require.NoError(t, err)
	require.Len(t, more.Claimed, 1)
	require.Equal(t, "small-1", more.Claimed[0].Target, "the raised default lets small-1 run a second command; big-1 keeps its own 3")

	_, err = schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "another-default", Scope: domain.LimitScopeTarget, MaxRunning: 5}, "test")
	require.ErrorIs(t, err, schema.ErrLimitConflict, "one default")
	require.ErrorIs(t, schema.DeleteLimit(b.ctx, b.pool, domain.DefaultTargetLimit), schema.ErrDefaultLimit)
	require.NoError(t, schema.DeleteLimit(b.ctx, b.pool, "big-1-three"))
	require.ErrorIs(t, schema.DeleteLimit(b.ctx, b.pool, "big-1-three"), schema.ErrNotFound)
}

// Replicas racing for the queue on connections of their own never run more than the
// limit at once. Each claimer counts what it holds (added after its claim committed,
// taken off before its rows end), so the sum can only be lower than what the
// database holds, never higher; the database's own count is checked after every
// claim too.
func TestConcurrentClaimersKeepToALabelLimitOfTwo(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	const targets, perTarget, claimers, limit = 8, 6, 4, 2
	var reqs []schema.NewDispatchRequest
	for i := range targets {
		name := fmt.Sprintf("prod-%d", i)
		b.addLabelledTarget(t, name, `{"env":"prod"}`)
		for j := range perTarget {
			reqs = append(reqs, req(fmt.Sprintf("%s-%d", name, j), name, "normal"))
		}
	}
	b.enqueue(t, reqs...)
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "prod", Scope: domain.LimitScopeLabel, Label: "env", Value: "prod", MaxRunning: limit}, "test")
	require.NoError(t, err)
	_, err = schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 10}, "test")
	require.NoError(t, err)

	var running, maxSeen, maxInDB atomic.Int64
	var done sync.Map
	var g errgroup.Group
	for c := range claimers {
		g.Go(func() error {
			conn, err := b.pool.Acquire(b.ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			for idle := 0; idle < 200; {
				res, err := schema.ClaimPending(b.ctx, conn.Conn(), fmt.Sprintf("replica-%d", c), 3)
				if err != nil {
					return err
				}
				if len(res.Claimed) == 0 {
					idle++
					if doneCount(&done) == targets*perTarget {
						return nil
					}
					continue
				}
				now := running.Add(int64(len(res.Claimed)))
				maxSeen.Store(max(maxSeen.Load(), now))
				var inDB int64
				if err := conn.QueryRow(b.ctx, `SELECT label_running('env', 'prod', 1000)`).Scan(&inDB); err != nil {
					return err
				}
				maxInDB.Store(max(maxInDB.Load(), inDB))
				ids := claimedIDs(res)
				running.Add(-int64(len(ids)))
				if _, err := conn.Exec(b.ctx, `UPDATE pending_dispatch_requests SET status = 'dispatched', dispatched_at = now() WHERE id = ANY($1)`, ids); err != nil {
					return err
				}
				for _, id := range ids {
					done.Store(id, true)
				}
			}
			return fmt.Errorf("claimer %d gave up with %d of %d requests done", c, doneCount(&done), targets*perTarget)
		})
	}
	require.NoError(t, g.Wait())
	require.Equal(t, targets*perTarget, doneCount(&done), "every request ran")
	require.LessOrEqual(t, maxSeen.Load(), int64(limit), "claimers held more than the limit at once")
	require.LessOrEqual(t, maxInDB.Load(), int64(limit), "the database counted more than the limit running")
	require.Equal(t, int64(limit), maxSeen.Load(), "the limit was reached, so the race was real")
}

func doneCount(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}

// allowParallel raises the per-target default so that a test about something else
// may run many commands on one target.
func (b dispatchBundle) allowParallel(t *testing.T) {
	t.Helper()
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: schema.MaxLimitRunning}, "test")
	require.NoError(t, err)
}
