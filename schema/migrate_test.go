package schema_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestMigrateAppliesEveryMigrationOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Pool(t)

	all, err := schema.Migrations()
	require.NoError(t, err)
	applied, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Len(t, applied, len(all))

	for _, table := range []string{
		"pending_dispatch_requests", "command_queue", "deployments", "deployment_steps",
		"targets", "thorax_instances", "deployment_events", "analyses", "schema_migrations",
	} {
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
		require.True(t, exists, "table %s", table)
	}
	var claimIndex string
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT indexdef FROM pg_indexes WHERE indexname = 'pending_dispatch_requests_claimable'`).Scan(&claimIndex))
	require.Contains(t, claimIndex, "WHERE (status = 'pending'::text)")
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Pool(t)

	_, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	again, err := schema.Migrate(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, again)
}

func TestConcurrentMigrateAppliesEachVersionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.DatabaseURL(t)

	const replicas = 4
	var (
		wg      sync.WaitGroup
		results = make([][]int, replicas)
		errs    = make([]error, replicas)
	)
	start := make(chan struct{})
	for i := range replicas {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = schema.Migrate(ctx, pool)
		}()
	}
	close(start)
	wg.Wait()

	all, err := schema.Migrations()
	require.NoError(t, err)
	total := 0
	for i := range replicas {
		require.NoError(t, errs[i])
		total += len(results[i])
	}
	require.Equal(t, len(all), total, "every migration applied exactly once across replicas")

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var rows int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&rows))
	require.Equal(t, len(all), rows)
}

func TestMigrateRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'future', '')`)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.ErrorContains(t, err, "newer than this binary knows")
}

func TestMigrateRefusesAnEditedMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	_, err := pool.Exec(ctx, `UPDATE schema_migrations SET checksum = 'edited' WHERE version = 2`)
	require.NoError(t, err)
	_, err = schema.Migrate(ctx, pool)
	require.ErrorContains(t, err, "migration 002_dispatch differs from the one applied")
}

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)

	var targetID string
	require.NoError(t, pool.QueryRow(ctx,
		`INSERT INTO targets (name, mode) VALUES ('web-1', 'poll') RETURNING id`).Scan(&targetID))

	_, err := pool.Exec(ctx, `INSERT INTO targets (name, mode) VALUES ('db-1', 'listen')`)
	require.ErrorContains(t, err, "targets_listen_has_address", "a listen-mode target needs an address")

	insert := `INSERT INTO pending_dispatch_requests (idempotency_key, target_id, command, priority, expires_at)
	           VALUES ($1, $2, $3, $4, now() + interval '24 hours')`
	_, err = pool.Exec(ctx, insert, "k1", targetID, "true", "high")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, insert, "k1", targetID, "true", "high")
	require.ErrorContains(t, err, "pending_dispatch_requests_idempotency_key_key", "enqueue is idempotent on its key")
	_, err = pool.Exec(ctx, insert, "k2", targetID, "true", "urgent")
	require.ErrorContains(t, err, "priority_check")
	_, err = pool.Exec(ctx, insert, "k3", targetID, "", "low")
	require.ErrorContains(t, err, "command_check")

	var rank int
	require.NoError(t, pool.QueryRow(ctx, `SELECT priority_rank FROM pending_dispatch_requests WHERE idempotency_key = 'k1'`).Scan(&rank))
	require.Equal(t, 0, rank)
}
