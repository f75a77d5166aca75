package schema_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// The claim and the delivery read their batch, not the queue: on a queue of
// thousands that has never been analysed (as a queue's statistics always lag its
// contents), the planner believing it holds a few rows must not lead either to read
// every pending row. The transaction's own counts of the table's reads say what they
// read.

const (
	longQueueTargets   = 10
	longQueuePerTarget = 300
	longQueueBatch     = 100
)

// fillLongQueue enqueues longQueuePerTarget requests on each of longQueueTargets
// targets, with a default target limit that does not bind.
func fillLongQueue(t *testing.T) dispatchBundle {
	t.Helper()
	names := make([]string, longQueueTargets)
	for i := range names {
		names[i] = fmt.Sprintf("web-%d", i)
	}
	b := setupDispatch(t, names...)
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: longQueuePerTarget}, "test")
	require.NoError(t, err)
	for i := range longQueuePerTarget {
		reqs := make([]schema.NewDispatchRequest, longQueueTargets)
		for j, name := range names {
			reqs[j] = req(fmt.Sprintf("k-%d-%d", i, j), name, "normal")
		}
		b.enqueue(t, reqs...)
	}
	return b
}

// queueReads is how the transaction has read pending_dispatch_requests so far:
// sequential scans begun, and rows fetched through indexes (bitmap scans included).
// A backend's counts not yet reported may include earlier transactions' (PostgreSQL
// 15), so callers compare two readings within one transaction.
func queueReads(t *testing.T, b dispatchBundle, tx pgx.Tx) (seqScans, fetched int64) {
	t.Helper()
	require.NoError(t, tx.QueryRow(b.ctx, `SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
		WHERE relname = 'pending_dispatch_requests'`).Scan(&seqScans, &fetched))
	return seqScans, fetched
}

func TestClaimReadsItsBatchNotTheQueue(t *testing.T) {
	t.Parallel()
	for _, labelLimit := range []bool{false, true} {
		// A label limit, even one no target falls under, sends the claim down its
		// other path (ClaimCandidates).
		t.Run(fmt.Sprintf("label-limit=%v", labelLimit), func(t *testing.T) {
			t.Parallel()
			b := fillLongQueue(t)
			if labelLimit {
				_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: "prod", Scope: domain.LimitScopeLabel, Label: "env", Value: "prod", MaxRunning: 2}, "test")
				require.NoError(t, err)
			}
			tx, err := b.pool.Begin(b.ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(b.ctx) }()
			scans, fetched := queueReads(t, b, tx)
			claim, err := schema.ClaimPending(b.ctx, tx, replica, longQueueBatch)
			require.NoError(t, err)
			require.Len(t, claim.Claimed, longQueueBatch)
			scansAfter, fetchedAfter := queueReads(t, b, tx)
			require.Equal(t, scans, scansAfter, "the claim scanned the whole queue")
			require.Less(t, fetchedAfter-fetched, int64(longQueueTargets*longQueuePerTarget/2),
				"the claim read most of the queue's %d rows for a batch of %d", longQueueTargets*longQueuePerTarget, longQueueBatch)
		})
	}
}

// A delivery finds its claimed rows by the address its lock keeps stable: a join on
// ids let the planner hash the whole table for every batch.
func TestDeliverReadsItsBatchNotTheQueue(t *testing.T) {
	t.Parallel()
	b := fillLongQueue(t)
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, longQueueBatch)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, longQueueBatch)
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	scans, _ := queueReads(t, b, tx)
	out, err := schema.DeliverClaimed(b.ctx, tx, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	for _, o := range out {
		require.Equal(t, domain.OutcomeDispatched, o.Outcome)
	}
	scansAfter, _ := queueReads(t, b, tx)
	require.Equal(t, scans, scansAfter, "the delivery scanned the whole queue")
}

// A batch of results reads its own commands, not every running one, whatever the
// table held when the connection first stored a result: the statement keeps the plan
// it made then (migration 021), so that plan must not depend on the table's size.
func TestStoreReadsItsBatchNotTheRunningCommands(t *testing.T) {
	t.Parallel()
	const many, batch = 600, 20
	names := make([]string, many)
	for i := range names {
		names[i] = fmt.Sprintf("web-%d", i+1)
	}
	b := setupDispatch(t, names...)
	_, err := schema.SetLimit(b.ctx, b.pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget, MaxRunning: 2}, "test")
	require.NoError(t, err)
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()

	// The connection's first result, while five commands run.
	_, few := runningDeploymentCommands(t, b, 5)
	b.storeSucceeded(t, conn, few[0])
	_, running := runningDeploymentCommands(t, b, many)

	tx, err := conn.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	reads := func() (seqScans, fetched int64) {
		require.NoError(t, tx.QueryRow(b.ctx, `SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
			WHERE relname = 'command_queue'`).Scan(&seqScans, &fetched))
		return seqScans, fetched
	}
	scans, fetched := reads()
	b.storeSucceeded(t, tx, running[:batch]...)
	scansAfter, fetchedAfter := reads()
	require.Equal(t, scans, scansAfter, "the store scanned every command")
	require.Less(t, fetchedAfter-fetched, int64(many/2), "the store read most of the %d running commands for a batch of %d", many, batch)
}
