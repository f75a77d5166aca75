package e2e_test

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// withQuery is rawURL with its connection parameters replaced by query.
func withQuery(t *testing.T, rawURL string, query url.Values) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	u.RawQuery = query.Encode()
	return u.String()
}

// PostgreSQL, started by the dev stack to require TLS, refuses a plain-text
// connection and a client that checks its certificate against another CA; a client
// with the stack's CA gets an encrypted session. The mandible binary, given a
// plain-text URL, exits naming the refusal, and given the stack's verify-full URL
// runs its migrations and serves over TLS.
func TestPostgresRefusesPlainTextAndAnotherCA(t *testing.T) {
	t.Parallel()
	stack := startOwnServers(t, "mantis-postgres-tls-", devstack.Options{Postgres: true, PostgresRequireTLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	good := stack.Env["DATABASE_URL"]
	connect := func(rawURL string) error {
		conn, err := pgx.Connect(ctx, rawURL)
		if err == nil {
			conn.Close(ctx)
		}
		return err
	}

	err := connect(withQuery(t, good, url.Values{"sslmode": {"disable"}}))
	require.ErrorContains(t, err, "no encryption", "a plain-text connection is refused by pg_hba.conf")

	other, err := devcerts.Generate(filepath.Join(t.TempDir(), "other"), nil)
	require.NoError(t, err)
	err = connect(withQuery(t, good, url.Values{"sslmode": {"verify-full"}, "sslrootcert": {other.CACert()}}))
	require.ErrorContains(t, err, "certificate signed by unknown authority", "a server certificate of another CA is refused")

	conn, err := pgx.Connect(ctx, good)
	require.NoError(t, err, "the stack's URL checks the server against the stack's CA")
	var encrypted bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&encrypted))
	require.NoError(t, conn.Close(ctx))
	require.True(t, encrypted, "the session is encrypted")

	temporal := testenv.TemporalServer(t)
	refused := launchReplica(t, replicaOptions{ID: uniqueName("plaindb"), Temporal: temporal,
		DatabaseURL: withQuery(t, good, url.Values{"sslmode": {"disable"}})})
	select {
	case <-refused.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("Mandible with a plain-text database URL still runs after 2 minutes:\n%s", refused.log())
	}
	require.Contains(t, refused.log(), "no encryption", "Mandible names the refusal")

	startReplica(t, replicaOptions{ID: uniqueName("tlsdb"), Temporal: temporal, DatabaseURL: good})
	conn, err = pgx.Connect(ctx, good)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var overTLS int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
		WHERE a.application_name LIKE 'mandible%' AND s.ssl`).Scan(&overTLS))
	require.Positive(t, overTLS, "Mandible's sessions are encrypted")
}
