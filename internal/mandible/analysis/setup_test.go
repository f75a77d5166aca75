package analysis_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/analysis"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// bundle is a migrated database with a live Thorax instance polling for target web-1,
// and a processor on it.
type bundle struct {
	ctx       context.Context
	pool      *pgxpool.Pool
	instance  uuid.UUID
	logs      *syncBuffer
	processor *analysis.Processor
}

const (
	target  = "web-1"
	replica = "replica-a"
)

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	// Every command of these tests runs on one target: they analyse results, not the
	// per-target concurrency default (one running command).
	_, err := schema.SetLimit(ctx, pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget,
		MaxRunning: schema.MaxLimitRunning}, "test")
	require.NoError(t, err)
	instance, err := schema.RegisterInstance(ctx, pool, schema.NewInstance{Name: "thorax-1", Version: "test"})
	require.NoError(t, err)
	_, err = schema.Heartbeat(ctx, pool, schema.HeartbeatRequest{Instance: instance, PollTargets: []string{target}})
	require.NoError(t, err)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &bundle{ctx: ctx, pool: pool, instance: instance, logs: logs,
		processor: &analysis.Processor{DB: pool, Logger: logger}}
}

// deployment inserts a running deployment and returns its id.
func (b *bundle) deployment(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.New()
	_, err := b.pool.Exec(b.ctx, `INSERT INTO deployments (id, name, priority, status, spec) VALUES ($1, 'web rollout', 'normal', 'running', '{}')`, id)
	require.NoError(t, err)
	return id
}

// run takes commands through the real path (enqueue, claim, deliver, fetch) and
// stores their results, as Thorax would; it returns the command ids in order.
func (b *bundle) run(t *testing.T, deploymentID *uuid.UUID, step *int, results ...schema.CommandResult) []uuid.UUID {
	t.Helper()
	reqs := make([]schema.NewDispatchRequest, len(results))
	for i := range results {
		reqs[i] = schema.NewDispatchRequest{IdempotencyKey: uuid.NewString(), Target: target, DeploymentID: deploymentID,
			StepPosition: step, Command: fmt.Sprintf("./deploy.sh part-%d", i), Priority: domain.PriorityNormal}
	}
	enqueued, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, reqs)
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, replica, len(reqs))
	require.NoError(t, err)
	require.Len(t, claim.Claimed, len(reqs))
	refs := make([]domain.ClaimRef, len(claim.Claimed))
	for i, c := range claim.Claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	out, err := schema.DeliverClaimed(b.ctx, b.pool, replica, refs, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	byRequest := map[uuid.UUID]uuid.UUID{}
	var ids []uuid.UUID
	for _, o := range out {
		require.Equal(t, domain.OutcomeDispatched, o.Outcome, o.Error)
		byRequest[o.RequestID] = *o.CommandID
		ids = append(ids, *o.CommandID)
	}
	cmds, err := schema.FetchPendingCommands(b.ctx, b.pool, schema.FetchCommandsRequest{InstanceID: b.instance, PollTargets: []string{target}, Max: len(ids), CommandIDs: ids})
	require.NoError(t, err)
	require.Len(t, cmds, len(ids))
	epochs := map[uuid.UUID]int64{}
	for _, c := range cmds {
		epochs[c.ID] = c.LeaseEpoch
	}
	// Results in the order of the requests.
	ordered := make([]uuid.UUID, len(reqs))
	for i, e := range enqueued {
		ordered[i] = byRequest[e.ID]
	}
	for i, id := range ordered {
		_, err := schema.StoreCommandResult(b.ctx, b.pool, schema.ResultToStore{Instance: b.instance, Command: id, Epoch: epochs[id], Result: results[i]})
		require.NoError(t, err)
	}
	return ordered
}

func failed(output string, exitCode int) schema.CommandResult {
	now := time.Now()
	return schema.CommandResult{ExitCode: exitCode, Output: output, StartedAt: now.Add(-time.Second), FinishedAt: now}
}

// storedEvent is a deployment_events row.
type storedEvent struct {
	DeploymentID *uuid.UUID
	Type         string
	Data         analysis.Event
}

// events returns the target.analysis events (the dispatch path writes others).
func (b *bundle) events(t *testing.T) []storedEvent {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, `SELECT deployment_id, type, data FROM deployment_events WHERE type = $1 ORDER BY id`, analysis.EventType)
	require.NoError(t, err)
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var (
			e    storedEvent
			data []byte
		)
		require.NoError(t, rows.Scan(&e.DeploymentID, &e.Type, &data))
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&e.Data))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func (b *bundle) analysis(t *testing.T, commandID uuid.UUID) schema.Analysis {
	t.Helper()
	a, err := schema.AnalysisByCommandID(b.ctx, b.pool, commandID)
	require.NoError(t, err)
	return a
}

// syncBuffer is a log destination goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *syncBuffer) Contains(sub string) bool { return strings.Contains(s.String(), sub) }

func (s *syncBuffer) Count(sub string) int { return strings.Count(s.String(), sub) }
