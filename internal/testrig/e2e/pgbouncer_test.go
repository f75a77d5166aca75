package e2e_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// setupPooledExec is setupExec with Mandible's database.url leading to PgBouncer in
// transaction mode and database.direct_url to PostgreSQL itself. The cluster's own
// pool (the test's view) is direct. The test holds the migration lock when Mandible
// starts: the returned waiter names the session Mandible migrates on.
func setupPooledExec(t *testing.T) (execSetup, *devstack.PgBouncer, migrationWaiter) {
	t.Helper()
	ctx := context.Background()
	direct := testenv.DatabaseURL(t)
	pgb, err := devstack.StartPgBouncer(ctx, slog.New(slog.DiscardHandler), devstack.PgBouncerOptions{Backend: direct, PoolSize: 4})
	require.NoError(t, err)
	t.Cleanup(pgb.Stop)
	pool, err := pgxpool.New(ctx, direct)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	migration := holdMigrationLock(t, pool)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	c := &execCluster{ctx: ctx, dir: dir, pool: pool, certs: certs, heartbeatTimeout: 10 * time.Second}
	c.mandibleOptions = replicaOptions{
		ID: uniqueName("pooled"), DatabaseURL: pgb.URL(), Temporal: testenv.TemporalServer(t), PollInterval: "2s",
		Env: []string{"MANTIS_DATABASE_DIRECT_URL=" + direct},
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, c.heartbeatTimeout)

	s := execSetup{execCluster: c, thorax: c.startThorax(t)}
	s.poll = c.startPollAgent(t, s.thorax)
	s.listen = c.startListenAgent(t)
	s.instance = c.waitRegistered(t, s.thorax)
	c.registerListenTarget(t, s.listen)
	c.waitPollTarget(t, s.poll, s.instance)
	return s, pgb, migration
}

// sessionsByApplicationName counts the database's sessions by application_name.
func sessionsByApplicationName(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database() GROUP BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// Mandible behind PgBouncer in transaction mode runs a deployment on a poll-mode and a
// listen-mode agent to success: its queries and transactions go through the pooler
// (whose server connections PostgreSQL sees named "<application_name> - <client
// host>:<port>"), its LISTEN sessions and migrations (their advisory lock) over
// database.direct_url.
func TestDeploymentWithMandibleBehindPgBouncer(t *testing.T) {
	s, pgb, migration := setupPooledExec(t)
	r := s.mandible.replica
	spec := fmt.Sprintf(`{"name":"pooled","targets":[%q,%q],"steps":[
		{"name":"first","command":"echo first"},
		{"name":"second","command":"echo second"}]}`, s.poll.Name, s.listen.Name)
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, "%v\npgbouncer:\n%s", created, pgb.Log())
	d := waitDeployment(t, r, created["id"].(string), "succeeded")
	for _, st := range d["steps"].([]any) {
		require.Equal(t, "succeeded", st.(map[string]any)["status"])
	}

	appName := config.Mandible{ReplicaID: r.ID}.ApplicationName()
	require.Equal(t, appName, migration.waited(t),
		"the migrations' advisory lock is asked for on a direct session, not a pooled one (\"<name> - <host>:<port>\")")
	sessions := sessionsByApplicationName(t, s.pool)
	pooled := 0
	for name, n := range sessions {
		if len(name) > len(appName) && name[:len(appName)+3] == appName+" - " {
			pooled += n
		}
	}
	require.Positive(t, pooled, "PostgreSQL sees Mandible's pooled connections come from PgBouncer: %v", sessions)
	require.LessOrEqual(t, pooled, 4, "no more than the pooler's pool size: %v", sessions)
	require.Positive(t, sessions[appName], "the LISTEN sessions come straight from Mandible: %v", sessions)

	var listening int
	require.NoError(t, s.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND query ~ '(^|\n)LISTEN '`,
		appName).Scan(&listening))
	require.Positive(t, listening, "a direct session holds the LISTEN")
}
