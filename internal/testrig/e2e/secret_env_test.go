package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The secrets of TestSecretEnvReachesOnlyTheCommand: distinct enough that finding one
// anywhere is a leak, not a coincidence.
const (
	secretLiteral = "s3cret-literal-7f3a9c"
	secretInFile  = "s3cret-file-91c2be"
	secretInEnv   = "s3cret-env-5d0e44"
)

// shortHash is what the command compares its env with, so that the command's own
// text, stored and shown everywhere, holds no secret.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

// A step's env_secret (a literal, a file: and an env: reference on Mandible) reaches
// the command on a real agent, and nowhere else in clear: not the database, not the
// API, not the Temporal history (raw, nor decoded by the codec as the Web UI shows
// it), not the agent's journal, not any process's log.
func TestSecretEnvReachesOnlyTheCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, keys := setupSecretCluster(t)
	th := c.startThorax(t)
	agent := c.startPollAgent(t, th)
	instance := c.waitRegistered(t, th)
	c.waitPollTarget(t, agent, instance)

	check := func(name, secret string) string {
		return fmt.Sprintf(`test "$(printf %%s "$%s" | sha256sum | cut -c1-16)" = %s`, name, shortHash(secret))
	}
	command := strings.Join([]string{
		check("TOKEN", secretLiteral),
		check("FROM_FILE", secretInFile),
		check("FROM_ENV", secretInEnv),
		`echo ok`,
	}, " && ")
	spec := fmt.Sprintf(`{"name":"secret-env","targets":[%q],"steps":[{"name":"use","command":%q,
		"env":{"PLAIN":"visible"},
		"env_secret":{"TOKEN":%q,"FROM_FILE":%q,"FROM_ENV":"env:MANTIS_SECRET_E2E"}}]}`,
		agent.Name, command, secretLiteral, "file:"+filepath.Join(c.secretsDir, "db-password"))
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	d := waitDeployment(t, c.mandible.replica, id, "succeeded")

	var output string
	require.NoError(t, c.pool.QueryRow(ctx, `SELECT coalesce(output, '') FROM command_queue WHERE deployment_id = $1`, id).Scan(&output))
	require.Contains(t, output, "ok", "the command saw every secret")

	leaks := []string{secretLiteral, secretInFile, secretInEnv}
	_, view := api(t, c.mandible.replica, http.MethodGet, "/api/v1/deployments/"+id, "")
	requireNoSecret(t, "the API's view", fmt.Sprint(view), leaks)
	require.Contains(t, fmt.Sprint(d["spec"]), secretenv.Redacted)

	var rows string
	require.NoError(t, c.pool.QueryRow(ctx, `SELECT
		(SELECT spec::text FROM deployments WHERE id = $1) ||
		(SELECT string_agg(env::text, ' ') FROM pending_dispatch_requests WHERE deployment_id = $1) ||
		(SELECT string_agg(env::text, ' ') FROM command_queue WHERE deployment_id = $1) ||
		(SELECT string_agg(data::text, ' ') FROM deployment_events WHERE deployment_id = $1)`, id).Scan(&rows))
	requireNoSecret(t, "the database", rows, leaks)
	require.Contains(t, rows, secretenv.Prefix, "the rows hold the secrets sealed")

	raw, decoded := deploymentHistory(t, id, keys)
	requireNoSecret(t, "the raw history", raw, leaks)
	requireNoSecret(t, "the history decoded by the codec", decoded, leaks)
	require.Contains(t, decoded, secretenv.Prefix, "decoded, the input holds the secrets sealed")
	require.Contains(t, decoded, "visible", "decoded, the plain env is there: the decoding worked")
	// The secrets are sealed before the workflow starts, so their absence from the
	// raw history alone would not show the codec at work: the input itself is
	// ciphertext, the spec's name and plain env included.
	input := startInput(t, id)
	requireSealedInput(t, input, "secret-env", "visible")
	// What the Web UI does with it: the codec endpoint gives the plain input back.
	requireCodecEndpointDecodes(t, c.mandible.replica, input, []string{`"secret-env"`, `"visible"`, secretenv.Prefix}, leaks)

	// Everything the test's processes wrote: configs, logs, the agent's journal.
	require.NoError(t, filepath.WalkDir(c.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		requireNoSecret(t, path, string(b), leaks)
		return nil
	}))
	journal, err := os.ReadDir(filepath.Join(c.dir, agent.Name, "journal"))
	require.NoError(t, err)
	require.NotEmpty(t, journal, "the agent journaled the command")
	requireNoSecret(t, "mandible's log", c.mandible.replica.log(), leaks)
}

func requireNoSecret(t *testing.T, where, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, text, s, "%s holds a secret in clear", where)
	}
}

// secretCluster is an execCluster whose Mandible encrypts payloads and resolves
// file: references under secretsDir.
type secretCluster struct {
	*execCluster
	secretsDir string
}

// setupSecretCluster starts Mandible, logging at debug, with a codec keyring, a
// secrets directory holding db-password and MANTIS_SECRET_E2E in its environment.
func setupSecretCluster(t *testing.T) (*secretCluster, *codec.Codec) {
	t.Helper()
	ctx := context.Background()
	url := testenv.DatabaseURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	private := t.TempDir() // outside dir: the test greps dir for leaks
	keyFile := filepath.Join(private, "codec.keys")
	_, err = codec.WriteKeyFile(keyFile, "k1")
	require.NoError(t, err)
	keys, err := codec.LoadFile(keyFile)
	require.NoError(t, err)
	secretsDir := filepath.Join(private, "secrets")
	require.NoError(t, os.Mkdir(secretsDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(secretsDir, "db-password"), []byte(secretInFile+"\n"), 0o600))
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	c := &execCluster{ctx: ctx, dir: dir, pool: pool, certs: certs, heartbeatTimeout: 10 * time.Second}
	c.mandibleOptions = replicaOptions{
		ID: uniqueName("secret"), DatabaseURL: url, Temporal: testenv.TemporalServer(t), PollInterval: "2s",
		Env: []string{
			"MANTIS_TEMPORAL_CODEC_KEY_FILE=" + keyFile,
			"MANTIS_SECRETS_FILES_DIR=" + secretsDir,
			"MANTIS_SECRET_E2E=" + secretInEnv,
			"MANTIS_LOG_LEVEL=debug",
			"MANTIS_TEMPORAL_UI_URL=" + secretUIURL,
		},
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, c.heartbeatTimeout)
	return &secretCluster{execCluster: c, secretsDir: secretsDir}, keys
}

// deploymentHistory returns a deployment workflow's whole history as text, raw as
// Temporal stores it and decoded by the codec as the Web UI shows it.
func deploymentHistory(t *testing.T, id string, keys *codec.Codec) (raw, decoded string) {
	t.Helper()
	tsrv := testenv.TemporalServer(t)
	decode, err := converter.NewPayloadCodecGRPCClientInterceptor(converter.PayloadCodecGRPCClientInterceptorOptions{
		Codecs: []converter.PayloadCodec{keys},
	})
	require.NoError(t, err)
	read := func(opts ...grpc.DialOption) string {
		tc, err := client.Dial(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace,
			ConnectionOptions: client.ConnectionOptions{DialOptions: opts}})
		require.NoError(t, err)
		defer tc.Close()
		var b strings.Builder
		iter := tc.GetWorkflowHistory(context.Background(), "deployment:"+id, "", false, 0)
		for iter.HasNext() {
			e, err := iter.Next()
			require.NoError(t, err)
			// Text, not JSON: payload bytes are printed as they are, not base64.
			js, err := prototext.Marshal(e)
			require.NoError(t, err)
			b.Write(js)
			b.WriteByte('\n')
		}
		return b.String()
	}
	return read(), read(grpc.WithChainUnaryInterceptor(decode))
}
