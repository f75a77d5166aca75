package schema_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// runningDeploymentCommands records a one-step deployment on n targets (web-1..web-n,
// registered by the caller) and returns it with its n commands, claimed by the bundle's
// instance.
func runningDeploymentCommands(t *testing.T, b dispatchBundle, n int) (uuid.UUID, []schema.Command) {
	t.Helper()
	targets := make([]string, n)
	for i := range targets {
		targets[i] = fmt.Sprintf("web-%d", i+1)
	}
	id, _, err := schema.CreateDeployment(b.ctx, b.pool, schema.NewDeployment{ID: uuid.New(), Name: "batch", Priority: "normal", Spec: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, schema.StartDeployment(b.ctx, b.pool, id, []schema.StepRecord{{Name: "run", Command: "true", Timeout: time.Minute}}, targets))
	require.NoError(t, schema.EnqueueStepTargets(b.ctx, b.pool, id, 0, "normal", schema.NewStepCommand{Command: "true", Timeout: time.Minute}, targets))
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, n)
	require.NoError(t, err)
	_, err = schema.DeliverClaimed(b.ctx, b.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: targets, Max: n})
	require.NoError(t, err)
	require.Len(t, cmds, n)
	return id, cmds
}

// storeSucceeded stores a success for each of cmds in one statement on db, and
// requires each to be stored.
func (b dispatchBundle) storeSucceeded(t *testing.T, db schema.DB, cmds ...schema.Command) {
	t.Helper()
	in := make([]schema.ResultToStore, len(cmds))
	for i, c := range cmds {
		in[i] = schema.ResultToStore{Instance: b.instance, Command: c.ID, Epoch: c.LeaseEpoch,
			Result: schema.CommandResult{StartedAt: time.Now(), FinishedAt: time.Now()}}
	}
	for _, a := range schema.StoreCommandResults(b.ctx, db, in) {
		require.NoError(t, a.Err)
	}
}

func setupResultBatch(t *testing.T, n int) (dispatchBundle, uuid.UUID, []schema.Command) {
	t.Helper()
	targets := make([]string, n)
	for i := range targets {
		targets[i] = fmt.Sprintf("web-%d", i+1)
	}
	b := setupDispatch(t, targets...)
	deployment, cmds := runningDeploymentCommands(t, b, n)
	return b, deployment, cmds
}

// One statement stores a batch; a stale lease epoch and a value the database refuses
// (an exit code beyond int4) fail only their own results, each with its own error,
// and the others are stored with their events and analysis requests.
func TestResultBatchRefusesOnlyTheStaleAndTheInvalid(t *testing.T) {
	t.Parallel()
	b, deployment, cmds := setupResultBatch(t, 6)
	now := time.Now()
	result := func(c schema.Command, exit int) schema.ResultToStore {
		return schema.ResultToStore{Instance: b.instance, Command: c.ID, Epoch: c.LeaseEpoch, Result: schema.CommandResult{
			ExitCode: exit, Output: "out of " + c.Target, StartedAt: now, FinishedAt: now,
		}}
	}
	in := []schema.ResultToStore{result(cmds[0], 0), result(cmds[1], 2), result(cmds[2], 0), result(cmds[3], 0), result(cmds[4], 1<<40), result(cmds[5], 0)}
	in[3].Epoch = cmds[3].LeaseEpoch + 1 // a fencing token the command never had

	answers := schema.StoreCommandResults(b.ctx, b.pool, in)

	require.Len(t, answers, len(in))
	for _, i := range []int{0, 1, 2, 5} {
		require.NoError(t, answers[i].Err, "result %d", i)
		require.False(t, answers[i].Stored.Replayed)
		require.Equal(t, cmds[i].Target, answers[i].Stored.Target)
		require.Equal(t, deployment, *answers[i].Stored.DeploymentID)
	}
	require.Equal(t, domain.CommandFailed, answers[1].Stored.Status)
	require.Equal(t, domain.CommandSucceeded, answers[0].Stored.Status)

	require.ErrorIs(t, answers[3].Err, schema.ErrNotHeld)
	require.ErrorContains(t, answers[3].Err, "stale lease epoch")
	var inputErr *domain.InputError
	require.ErrorAs(t, answers[4].Err, &inputErr)
	require.ErrorContains(t, answers[4].Err, "exit code")

	want := map[uuid.UUID]string{cmds[0].ID: "succeeded", cmds[1].ID: "failed", cmds[2].ID: "succeeded",
		cmds[3].ID: "running", cmds[4].ID: "running", cmds[5].ID: "succeeded"}
	for id, status := range want {
		var got string
		var output *string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status, output FROM command_queue WHERE id = $1`, id).Scan(&got, &output))
		require.Equal(t, status, got, "command %s", id)
		if status != "running" {
			require.NotNil(t, output)
			require.Contains(t, *output, "out of web-")
		}
	}
	var events, analyses int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM deployment_events WHERE deployment_id = $1 AND type IN ('target.succeeded', 'target.failed')`, deployment).Scan(&events))
	require.Equal(t, 4, events, "one target event per stored result")
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM analyses WHERE command_id = $1`, cmds[1].ID).Scan(&analyses))
	require.Equal(t, 1, analyses, "the failure's analysis request is written with it")
	// Each event and analysis request carries its own result, not a neighbour's.
	for i, c := range []schema.Command{cmds[0], cmds[1], cmds[2], cmds[5]} {
		var exit int
		var tail string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT (data->>'exit_code')::int, data->>'output_tail' FROM deployment_events
			WHERE deployment_id = $1 AND type IN ('target.succeeded', 'target.failed') AND data->>'command_id' = $2`, deployment, c.ID.String()).Scan(&exit, &tail))
		require.Equal(t, map[bool]int{true: 2, false: 0}[i == 1], exit, "event of %s", c.Target)
		require.Equal(t, "out of "+c.Target, tail, "event of %s", c.Target)
	}
	var analysisInput string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT input FROM analyses WHERE command_id = $1`, cmds[1].ID).Scan(&analysisInput))
	require.Contains(t, analysisInput, "out of "+cmds[1].Target)

	// The same batch again: the stored results are replays, accepted once more without
	// a second event; the stale one is still refused.
	again := schema.StoreCommandResults(b.ctx, b.pool, []schema.ResultToStore{in[0], in[3], in[0]})
	require.NoError(t, again[0].Err)
	require.True(t, again[0].Stored.Replayed)
	require.ErrorIs(t, again[1].Err, schema.ErrNotHeld)
	require.NoError(t, again[2].Err, "a command named twice in one batch is a replay")
	require.True(t, again[2].Stored.Replayed)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM deployment_events WHERE deployment_id = $1 AND type IN ('target.succeeded', 'target.failed')`, deployment).Scan(&events))
	require.Equal(t, 4, events)
}

// In a batch, each result is stored only from the instance holding its command or for
// the command's own target; another caller's result fails alone with ErrNotOwn, and
// stores nothing, even at the current epoch.
func TestResultBatchStoresOnlyFromTheHolderOrForTheTarget(t *testing.T) {
	t.Parallel()
	b, _, cmds := setupResultBatch(t, 4)
	stranger := uuid.New()
	result := func(c schema.Command, instance uuid.UUID, target string) schema.ResultToStore {
		return schema.ResultToStore{Instance: instance, Command: c.ID, Epoch: c.LeaseEpoch, Target: target,
			Result: schema.CommandResult{ExitCode: 0, Output: "forged"}}
	}
	in := []schema.ResultToStore{
		result(cmds[0], b.instance, ""),           // the holder
		result(cmds[1], stranger, ""),             // names no target
		result(cmds[2], stranger, cmds[3].Target), // another target's agent
		result(cmds[3], stranger, cmds[3].Target), // a forward for its own target
	}
	answers := schema.StoreCommandResults(b.ctx, b.pool, in)
	require.NoError(t, answers[0].Err)
	require.NoError(t, answers[3].Err)
	for _, i := range []int{1, 2} {
		require.ErrorIs(t, answers[i].Err, schema.ErrNotOwn, "result %d", i)
		var status string
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM command_queue WHERE id = $1`, cmds[i].ID).Scan(&status))
		require.Equal(t, domain.CommandRunning, status, "result %d stored nothing", i)
	}
}

// Concurrent callers of a ResultBatcher share statements: 64 results released at once
// through one flush at a time take fewer than 64 batches, and each caller gets its own
// answer.
func TestResultBatcherGroupsConcurrentCallers(t *testing.T) {
	t.Parallel()
	const n = 64
	b, deployment, cmds := setupResultBatch(t, n)
	batcher := &schema.ResultBatcher{DB: b.pool, MaxFlushes: 1}
	now := time.Now()
	var (
		wg      sync.WaitGroup
		release = make(chan struct{})
		answers = make([]schema.ResultAnswer, n)
	)
	for i, c := range cmds {
		wg.Go(func() {
			<-release
			s, err := batcher.Store(b.ctx, schema.ResultToStore{Instance: b.instance, Command: c.ID, Epoch: c.LeaseEpoch,
				Result: schema.CommandResult{ExitCode: i % 2, StartedAt: now, FinishedAt: now}})
			answers[i] = schema.ResultAnswer{Stored: s, Err: err}
		})
	}
	close(release)
	wg.Wait()

	for i, a := range answers {
		require.NoError(t, a.Err, "caller %d", i)
		require.Equal(t, cmds[i].ID, a.Stored.CommandID)
		require.Equal(t, map[bool]string{true: domain.CommandSucceeded, false: domain.CommandFailed}[i%2 == 0], a.Stored.Status)
	}
	batches, results := batcher.Stats()
	require.EqualValues(t, n, results)
	require.Less(t, batches, int64(n), "concurrent results share batches")
	var stored int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status IN ('succeeded', 'failed')`, deployment).Scan(&stored))
	require.Equal(t, n, stored)

	// A lone result goes at once, in a batch of its own, and a replay is answered so.
	s, err := batcher.Store(b.ctx, schema.ResultToStore{Instance: b.instance, Command: cmds[0].ID, Epoch: cmds[0].LeaseEpoch,
		Result: schema.CommandResult{StartedAt: now, FinishedAt: now}})
	require.NoError(t, err)
	require.True(t, s.Replayed)
	after, _ := batcher.Stats()
	require.Equal(t, batches+1, after)
}

// gatedDB holds each statement of a ResultBatcher until the test releases it, and
// tells the test how many results each statement carries.
type gatedDB struct {
	*pgxpool.Pool
	entered chan int
	gate    chan struct{}
}

func (g gatedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	g.entered <- len(args[0].([]uuid.UUID))
	<-g.gate
	return g.Pool.Query(ctx, sql, args...)
}

// While a batch is in flight, the results that arrive wait for the next batch rather
// than each starting a small statement of its own: a further flush starts only once a
// whole batch waits, and it carries that whole batch.
func TestResultBatcherStartsAFurtherFlushOnlyForAWholeBatch(t *testing.T) {
	t.Parallel()
	const maxBatch = 4
	b, _, cmds := setupResultBatch(t, 1+maxBatch)
	db := gatedDB{Pool: b.pool, entered: make(chan int, 1+maxBatch), gate: make(chan struct{})}
	release := sync.OnceFunc(func() { close(db.gate) })
	t.Cleanup(release) // a failed check must not leave the statements held
	batcher := &schema.ResultBatcher{DB: db, MaxBatch: maxBatch, MaxFlushes: 4}
	now := time.Now()
	var wg sync.WaitGroup
	store := func(c schema.Command) {
		wg.Go(func() {
			_, err := batcher.Store(b.ctx, schema.ResultToStore{Instance: b.instance, Command: c.ID, Epoch: c.LeaseEpoch,
				Result: schema.CommandResult{StartedAt: now, FinishedAt: now}})
			assert.NoError(t, err, "result of %s", c.Target)
		})
	}

	store(cmds[0])
	require.Equal(t, 1, <-db.entered, "a lone result goes at once")
	for _, c := range cmds[1:] {
		store(c)
	}
	require.Equal(t, maxBatch, <-db.entered, "the results arriving meanwhile wait until they make a whole batch")
	release()
	wg.Wait()
	batches, results := batcher.Stats()
	require.EqualValues(t, 2, batches)
	require.EqualValues(t, 1+maxBatch, results)
}
