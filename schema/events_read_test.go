package schema_test

import (
	"context"
	"math"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func insertDeployment(t *testing.T, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	id := uuid.New()
	_, err := pool.Exec(context.Background(),
		`INSERT INTO deployments (id, name, priority, spec) VALUES ($1, 'events', 'normal', '{}')`, id)
	require.NoError(t, err)
	return id
}

func eventIDs(events []schema.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func TestReadEventsFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	a, b := insertDeployment(t, pool), insertDeployment(t, pool)
	type target struct {
		Target string `json:"target"`
	}
	inserts := []struct {
		deployment *uuid.UUID
		typ        string
		data       any
	}{
		{&a, "deployment.started", map[string]any{}},                // 1
		{&a, "step.started", map[string]any{"step": "build"}},       // 2
		{&a, "target.finished", target{"web-1"}},                    // 3
		{&b, "target.finished", target{"web-2"}},                    // 4
		{&b, "step.finished", map[string]any{"target": "web-1"}},    // 5
		{nil, "target.exit_code", target{"web-1"}},                  // 6
		{&a, "target.exitxcode", target{"web-1"}},                   // 7: "_" must not act as a wildcard
		{&b, "deployment.succeeded", map[string]any{"target": 12}},  // 8
		{&a, "step.started", map[string]any{"target": []int{1, 2}}}, // 9
	}
	for _, in := range inserts {
		require.NoError(t, schema.InsertEvent(ctx, pool, in.deployment, in.typ, in.data))
	}
	all, err := schema.ReadEvents(ctx, pool, 0, math.MaxInt64, schema.EventFilter{}, 100)
	require.NoError(t, err)
	require.Len(t, all, len(inserts))
	base := all[0].ID - 1
	ids := func(n ...int64) []int64 {
		if n == nil {
			n = []int64{}
		}
		for i := range n {
			n[i] += base
		}
		return n
	}
	require.Equal(t, ids(1, 2, 3, 4, 5, 6, 7, 8, 9), eventIDs(all))
	require.Equal(t, "step.started", all[1].Type)
	require.Equal(t, &a, all[1].DeploymentID)
	require.JSONEq(t, `{"step":"build"}`, string(all[1].Data))
	require.Nil(t, all[5].DeploymentID)

	cases := map[string]struct {
		after, through int64
		filter         schema.EventFilter
		limit          int
		want           []int64
	}{
		"deployment":            {filter: schema.EventFilter{DeploymentID: &a}, want: ids(1, 2, 3, 7, 9)},
		"exact type":            {filter: schema.EventFilter{Types: []string{"target.exit_code"}}, want: ids(6)},
		"prefix":                {filter: schema.EventFilter{Types: []string{"step.*"}}, want: ids(2, 5, 9)},
		"several types":         {filter: schema.EventFilter{Types: []string{"deployment.*", "target.finished"}}, want: ids(1, 3, 4, 8)},
		"target":                {filter: schema.EventFilter{Targets: []string{"web-1"}}, want: ids(3, 5, 6, 7)},
		"non-string target":     {filter: schema.EventFilter{Targets: []string{"12"}}, want: ids(8)},
		"several targets":       {filter: schema.EventFilter{Targets: []string{"web-1", "web-2"}}, want: ids(3, 4, 5, 6, 7)},
		"all filters":           {filter: schema.EventFilter{DeploymentID: &a, Types: []string{"target.*"}, Targets: []string{"web-1"}}, want: ids(3, 7)},
		"range":                 {after: base + 2, through: base + 5, want: ids(3, 4, 5)},
		"limit":                 {limit: 2, want: ids(1, 2)},
		"range and filter":      {after: base + 3, through: base + 8, filter: schema.EventFilter{Targets: []string{"web-1"}}, want: ids(5, 6, 7)},
		"nothing matches":       {filter: schema.EventFilter{Types: []string{"deployment.cancelled"}}, want: ids()},
		"after everything":      {after: base + 9, want: ids()},
		"deployment and prefix": {filter: schema.EventFilter{DeploymentID: &b, Types: []string{"step.*", "deployment.*"}}, want: ids(5, 8)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			through, limit := c.through, c.limit
			if through == 0 {
				through = math.MaxInt64
			}
			if limit == 0 {
				limit = 100
			}
			got, err := schema.ReadEvents(ctx, pool, c.after, through, c.filter, limit)
			require.NoError(t, err)
			require.Equal(t, c.want, eventIDs(got))
		})
	}
}

func TestLatestEventID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	latest, err := schema.LatestEventID(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, latest)

	require.NoError(t, schema.InsertEvent(ctx, pool, nil, "target.registered", map[string]any{}))
	require.NoError(t, schema.InsertEvent(ctx, pool, nil, "target.registered", map[string]any{}))
	all, err := schema.ReadEvents(ctx, pool, 0, math.MaxInt64, schema.EventFilter{}, 10)
	require.NoError(t, err)
	latest, err = schema.LatestEventID(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, all[1].ID, latest)
}

func TestEventLogWritersListsOpenInsertingTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)

	writers, err := schema.EventLogWriters(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, writers)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	var vxid string
	require.NoError(t, tx.QueryRow(ctx, `SELECT virtualtransaction FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'virtualxid'`).Scan(&vxid))
	require.NoError(t, schema.InsertEvent(ctx, tx, nil, "target.registered", map[string]any{}))

	// A reader in its own transaction is not a writer.
	reader, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer reader.Rollback(ctx)
	_, err = schema.ReadEvents(ctx, reader, 0, math.MaxInt64, schema.EventFilter{}, 10)
	require.NoError(t, err)

	writers, err = schema.EventLogWriters(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []string{vxid}, writers)

	require.NoError(t, tx.Commit(ctx))
	writers, err = schema.EventLogWriters(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, writers)
}
