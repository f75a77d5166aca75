package schema_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func external(id, input string) schema.NewExternalAnalysis {
	return schema.NewExternalAnalysis{ExternalID: id, Input: input, Category: "disk_full", Summary: "no space left on device: /srv", Suggestion: "Free space."}
}

func TestExternalAnalysisIsStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testenv.MigratedPool(t)

	created, err := schema.InsertExternalAnalysis(ctx, pool, external("req-1", "No space left on device"))
	require.NoError(t, err)
	require.True(t, created)
	again := external("req-1", "something else")
	again.Category = "unknown"
	created, err = schema.InsertExternalAnalysis(ctx, pool, again)
	require.NoError(t, err)
	require.False(t, created, "a request_id is stored once")

	a, err := schema.AnalysisByExternalID(ctx, pool, "req-1")
	require.NoError(t, err)
	require.Equal(t, schema.AnalysisExternal, a.Source)
	require.Equal(t, domain.AnalysisQueued, a.Status)
	require.Equal(t, "req-1", a.ExternalID)
	require.Nil(t, a.CommandID)
	require.Equal(t, "disk_full", a.Category, "the first request's classification stays")
	require.Nil(t, a.FinishedAt)

	_, err = schema.AnalysisByExternalID(ctx, pool, "req-2")
	require.ErrorIs(t, err, schema.ErrNotFound)
}

func TestExternalAnalysisKeepsTheEndOfLongOutput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testenv.MigratedPool(t)
	input := strings.Repeat("é", 70000) + "THE END"
	_, err := schema.InsertExternalAnalysis(ctx, pool, external("long", input))
	require.NoError(t, err)
	var stored string
	require.NoError(t, pool.QueryRow(ctx, `SELECT input FROM analyses WHERE external_id = 'long'`).Scan(&stored))
	require.Equal(t, schema.MaxAnalysisInput, len([]rune(stored)))
	require.True(t, strings.HasSuffix(stored, "THE END"))
}

func TestLockQueuedAnalysesSkipsRowsAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testenv.MigratedPool(t)
	for _, id := range []string{"a", "b", "c"} {
		_, err := schema.InsertExternalAnalysis(ctx, pool, external(id, "x"))
		require.NoError(t, err)
	}

	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	held, err := schema.LockQueuedAnalyses(ctx, first, 2)
	require.NoError(t, err)
	require.Len(t, held, 2)
	require.Equal(t, []string{"a", "b"}, []string{held[0].ExternalID, held[1].ExternalID}, "oldest first")
	require.Equal(t, "disk_full", held[0].Category)

	second, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = second.Rollback(ctx) }()
	rest, err := schema.LockQueuedAnalyses(ctx, second, 10)
	require.NoError(t, err)
	require.Len(t, rest, 1, "rows the first transaction holds are skipped")
	require.Equal(t, "c", rest[0].ExternalID)

	for _, q := range held {
		ok, err := schema.FinishAnalysis(ctx, first, q.ID, schema.AnalysisOutcome{Category: "disk_full", Summary: "s", Suggestion: "f", RefinedBy: "rules"})
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, first.Commit(ctx))
	require.NoError(t, schema.FailAnalysis(ctx, second, rest[0].ID, "could not record"))
	require.NoError(t, second.Commit(ctx))

	a, err := schema.AnalysisByExternalID(ctx, pool, "a")
	require.NoError(t, err)
	require.Equal(t, domain.AnalysisDone, a.Status)
	require.Equal(t, "rules", a.RefinedBy)
	require.Empty(t, a.Error)
	require.NotNil(t, a.FinishedAt)
	c, err := schema.AnalysisByExternalID(ctx, pool, "c")
	require.NoError(t, err)
	require.Equal(t, domain.AnalysisFailed, c.Status)
	require.Equal(t, "could not record", c.Error)

	ok, err := schema.FinishAnalysis(ctx, pool, a.ID, schema.AnalysisOutcome{Category: "unknown", Summary: "again"})
	require.NoError(t, err)
	require.False(t, ok, "a finished analysis is not finished again")
	queued, err := schema.LockQueuedAnalyses(ctx, pool, 10)
	require.NoError(t, err)
	require.Empty(t, queued)
}

// A failed command's analysis carries what the analyser needs from its command.
func TestFailedCommandAnalysisCarriesItsCommand(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, "web-1")
	b.allowParallel(t) // many requests on one target at once
	b.enqueue(t, req("fails", "web-1", "normal"), req("succeeds", "web-1", "normal"))
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, 10)
	require.NoError(t, err)
	_, err = schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{"web-1"}, Max: 10})
	require.NoError(t, err)
	require.Len(t, cmds, 2)
	now := time.Now()
	_, err = schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{Instance: b.instance, Command: cmds[0].ID, Epoch: cmds[0].LeaseEpoch, Result: schema.CommandResult{ExitCode: -1, Output: "waiting", TimedOut: true, StartedAt: now, FinishedAt: now}})
	require.NoError(t, err)
	_, err = schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{Instance: b.instance, Command: cmds[1].ID, Epoch: cmds[1].LeaseEpoch, Result: schema.CommandResult{ExitCode: 0, Output: "ok", StartedAt: now, FinishedAt: now}})
	require.NoError(t, err)

	a, err := schema.AnalysisByCommandID(b.ctx, b.pool, cmds[0].ID)
	require.NoError(t, err)
	require.Equal(t, schema.AnalysisInternal, a.Source)
	require.Equal(t, domain.AnalysisQueued, a.Status)
	require.Equal(t, &cmds[0].ID, a.CommandID)
	_, err = schema.AnalysisByCommandID(b.ctx, b.pool, cmds[1].ID)
	require.ErrorIs(t, err, schema.ErrNotFound, "a command that succeeded has no analysis")
	_, err = schema.AnalysisByCommandID(b.ctx, b.pool, uuid.New())
	require.ErrorIs(t, err, schema.ErrNotFound)

	queued, err := schema.LockQueuedAnalyses(b.ctx, b.pool, 10)
	require.NoError(t, err)
	require.Len(t, queued, 1)
	q := queued[0]
	require.Equal(t, "web-1", q.Target)
	require.Equal(t, -1, *q.ExitCode)
	require.Equal(t, "timed out", q.CommandError)
	require.Equal(t, "waiting\ntimed out", q.Input)
	require.Nil(t, q.DeploymentID)
	require.Nil(t, q.StepPosition)
	require.Empty(t, q.Category, "internal rows are classified by the processor")
}
