package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/schema"
)

// migrationLockKey is the key of the session advisory lock schema.Migrate takes
// ("mantis" in ASCII). holdMigrationLock checks it against schema.Migrate itself.
const migrationLockKey int64 = 0x6d616e746973

// migrationWaiter is the session that asked for the migration lock while the test
// held it: Mandible's migration session.
type migrationWaiter struct {
	appName chan string
}

// holdMigrationLock takes the migration lock on a session of pool, checks that
// schema.Migrate waits for it (so the key is the one Mandible takes), and releases it
// once another session waits for it, reporting that session's application_name.
func holdMigrationLock(t *testing.T, pool *pgxpool.Pool) migrationWaiter {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = schema.Migrate(short, pool)
	cancel()
	require.Error(t, err, "schema.Migrate waits for the lock the test holds")

	// The probe's own wait above may linger a moment after its cancellation; its
	// session carries no application_name, which every Mandible session does.
	w := migrationWaiter{appName: make(chan string, 1)}
	go func() {
		defer conn.Release()
		defer func() { _, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, migrationLockKey) }()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			var name string
			err := conn.QueryRow(ctx, `
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND l.pid <> pg_backend_pid()
  AND a.application_name <> ''
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = ($1::bigint >> 32) AND l.objid::bigint = ($1::bigint & 4294967295)`,
				migrationLockKey).Scan(&name)
			if err == nil {
				w.appName <- name
				return
			}
			time.Sleep(100 * time.Millisecond) // polling pg_locks: no notification exists for a lock wait
		}
		close(w.appName)
	}()
	return w
}

// waited returns the application_name of the session that waited for the lock.
func (w migrationWaiter) waited(t *testing.T) string {
	t.Helper()
	select {
	case name, ok := <-w.appName:
		require.True(t, ok, "no session asked for the migration lock")
		return name
	case <-time.After(2 * time.Minute):
		t.Fatal("no session asked for the migration lock")
		return ""
	}
}
