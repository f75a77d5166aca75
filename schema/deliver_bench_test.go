package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// statementsLoadSQL and the statements after it are the delivery as separate
// statements, the writes sent in one pgx batch: the locking read of the claimed
// requests with what the delivery decides on (the same as DeliverClaimed's), then one
// INSERT of the commands and one UPDATE of the dispatched requests by id. They are the
// baseline of BenchmarkDeliverAgainstStatements: DeliverClaimed records a batch's
// outcomes, whatever they are, in one statement instead.
const (
	statementsLoadSQL = `
		SELECT p.id, p.claim_epoch = b.epoch AND p.claimed_by IS NOT DISTINCT FROM $3,
		       p.attempts, p.expires_at <= now(), now() - p.created_at, p.last_error, p.next_attempt_at,
		       p.priority, t.name, t.mode, t.assigned_instance_id,
		       EXISTS (SELECT 1 FROM thorax_instances i
		               WHERE i.id = t.assigned_instance_id AND i.status = 'live'
		                 AND i.last_heartbeat_at > now() - make_interval(secs => 3600)),
		       t.deregistered_at IS NOT NULL,
		       (SELECT c.id FROM command_queue c WHERE c.dispatch_request_id = p.id AND c.dispatch_attempt = p.attempts)
		FROM unnest($1::uuid[], $2::bigint[]) AS b(id, epoch)
		JOIN pending_dispatch_requests p ON p.id = b.id
		JOIN targets t ON t.id = p.target_id
		FOR UPDATE OF p`
	statementsInsertSQL = `
		INSERT INTO command_queue (id, dispatch_request_id, dispatch_attempt, target_id, deployment_id, step_position,
		                           command, timeout, env, working_dir, priority, mode, assigned_instance_id, max_retries,
		                           trace_parent)
		SELECT n.id, p.id, p.attempts, p.target_id, p.deployment_id, p.step_position,
		       p.command, p.timeout, p.env, p.working_dir, p.priority, t.mode, t.assigned_instance_id, n.retries,
		       p.trace_parent
		FROM unnest($1::uuid[], $2::uuid[], $3::int[]) AS n(id, req, retries)
		JOIN pending_dispatch_requests p ON p.id = n.req
		JOIN targets t ON t.id = p.target_id`
	statementsDispatchedSQL = `
		UPDATE pending_dispatch_requests
		SET status = 'dispatched', dispatched_at = now(), last_error = NULL
		WHERE id = ANY($1)`
)

// statementsRow is what statementsLoadSQL reads of a request beside its id and
// whether the caller holds it: what a delivery decides on (the baseline dispatches
// every held request, as all targets are live).
type statementsRow struct {
	attempts                    int
	expired, live, deregistered bool
	queued                      time.Duration
	lastError                   *string
	nextAttempt                 time.Time
	priority, target, mode      string
	instance, existingCommand   *uuid.UUID
}

// benchDeliverer delivers a claimed batch and says how many commands it wrote.
type benchDeliverer func(ctx context.Context, conn *pgx.Conn, batch []domain.ClaimRef) (int, error)

// BenchmarkDeliverAgainstStatements claims a queue of 1,000 live targets, 10 requests
// each, in batches of 100 and delivers every batch: with DeliverClaimed, and with the
// same writes as separate statements in one pgx batch, in one run. Only the deliveries
// are timed. The figures are requests delivered per second and DeliverClaimed's
// ratio to the statements (above 1: DeliverClaimed is faster).
func BenchmarkDeliverAgainstStatements(b *testing.B) {
	sides := []struct {
		name    string
		deliver benchDeliverer
	}{
		{"deliverclaimed", func(ctx context.Context, conn *pgx.Conn, batch []domain.ClaimRef) (int, error) {
			out, err := schema.DeliverClaimed(ctx, conn, replica, batch, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
			n := 0
			for _, o := range out {
				if o.Outcome == domain.OutcomeDispatched {
					n++
				}
			}
			return n, err
		}},
		{"statements", deliverWithStatements},
	}
	took := make([]time.Duration, len(sides))
	for range b.N {
		for i, s := range sides {
			took[i] += deliverQueue(b, s.deliver)
		}
	}
	rows := float64(b.N * benchLimitTargets * benchLimitPerTarget)
	b.ReportMetric(0, "ns/op")
	for i, s := range sides {
		b.ReportMetric(rows/took[i].Seconds(), s.name+"-rows/s")
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "deliverclaimed/statements")
}

// deliverWithStatements is the baseline delivery: every held request is dispatched.
func deliverWithStatements(ctx context.Context, conn *pgx.Conn, batch []domain.ClaimRef) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	ids, epochs := make([]uuid.UUID, len(batch)), make([]int64, len(batch))
	for i, c := range batch {
		ids[i], epochs[i] = c.ID, c.Epoch
	}
	rows, err := tx.Query(ctx, statementsLoadSQL, ids, epochs, replica)
	if err != nil {
		return 0, err
	}
	var held []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		var ok bool
		var r statementsRow
		if err := rows.Scan(&id, &ok, &r.attempts, &r.expired, &r.queued, &r.lastError, &r.nextAttempt, &r.priority,
			&r.target, &r.mode, &r.instance, &r.live, &r.deregistered, &r.existingCommand); err != nil {
			rows.Close()
			return 0, err
		}
		if ok {
			held = append(held, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	cmdIDs, retries := make([]uuid.UUID, len(held)), make([]int32, len(held))
	for i := range held {
		cmdIDs[i], retries[i] = uuid.Must(uuid.NewV7()), domain.MaxDispatchRetries
	}
	sent := &pgx.Batch{}
	sent.Queue(statementsInsertSQL, cmdIDs, held, retries)
	sent.Queue(statementsDispatchedSQL, held)
	if err := tx.SendBatch(ctx, sent).Close(); err != nil {
		return 0, err
	}
	return len(held), tx.Commit(ctx)
}

// deliverQueue claims a fresh queue empty in batches of benchLimitBatch, delivering
// each with deliver on a connection of its own, and returns the time the deliveries
// took. Every request must be dispatched.
func deliverQueue(b *testing.B, deliver benchDeliverer) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	bd := fillLimitsQueue(b, false, true)
	_, err := schema.SetLimit(bd.ctx, bd.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: benchLimitPerTarget}, "bench")
	require.NoError(b, err)
	conn, err := bd.pool.Acquire(bd.ctx)
	require.NoError(b, err)
	defer conn.Release()
	var took time.Duration
	dispatched := 0
	for {
		res, err := schema.ClaimPending(bd.ctx, conn.Conn(), replica, benchLimitBatch)
		require.NoError(b, err)
		if len(res.Claimed) == 0 {
			break
		}
		batch := make([]domain.ClaimRef, len(res.Claimed))
		for i, c := range res.Claimed {
			batch[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
		}
		start := time.Now()
		n, err := deliver(bd.ctx, conn.Conn(), batch)
		took += time.Since(start)
		require.NoError(b, err)
		dispatched += n
	}
	require.Equal(b, benchLimitTargets*benchLimitPerTarget, dispatched)
	return took
}
