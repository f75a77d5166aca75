package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// startAuthorizingTemporal starts a stack of its own: PostgreSQL and temporal-server
// with its JWT claim mapper and default authorizer, the stack issuing the tokens.
func startAuthorizingTemporal(t *testing.T) *devstack.Stack {
	t.Helper()
	if !devstack.TemporalServerInstalled() {
		if os.Getenv(testenv.RequireTemporalServerEnv) == "1" {
			t.Fatalf("%s=1 but temporal-server %s is not installed", testenv.RequireTemporalServerEnv, devstack.TemporalServerVersion)
		}
		t.Skipf("temporal-server %s is not installed (mantisctl dev install --temporal-server)", devstack.TemporalServerVersion)
	}
	return startOwnServers(t, "mantis-temporal-auth-", devstack.Options{Postgres: true,
		Temporal: true, TemporalServer: true, TemporalAuthorization: true})
}

// startOwnServers starts the servers opts selects for this test alone, in a throw-away
// directory under prefix, and stops them when the test ends.
func startOwnServers(t *testing.T, prefix string, opts devstack.Options) *devstack.Stack {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755)) // PostgreSQL's own user reaches its data
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts.Dir, opts.Ephemeral = dir, true
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stack, err := devstack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = stack.Stop(stopCtx)
	})
	return stack
}

// dialWithToken is a client of addr's default namespace sending token as its bearer
// credential (none when empty), over plain loopback gRPC. It connects at its first
// call, so that a refused token is refused there.
func dialWithToken(t *testing.T, addr, token string) client.Client {
	t.Helper()
	opts := client.Options{HostPort: addr, Namespace: "default",
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))}
	if token != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(token)
		opts.ConnectionOptions.TLSDisabled = true
	}
	c, err := client.NewLazyClient(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// requirePermissionDenied fails unless err is Temporal's refusal of the caller.
func requirePermissionDenied(t *testing.T, err error, what string) {
	t.Helper()
	var denied *serviceerror.PermissionDenied
	require.True(t, errors.As(err, &denied), "%s: want PermissionDenied, got %v", what, err)
}

// Temporal's own authorisation refuses every wrong identity on a production
// temporal-server with its JWT claim mapper and default authorizer: no token, a token
// signed by another key under the issuer's key id, an expired one, one for another
// namespace, and a read-only one asked to write. The right token is let in. And the
// mandible binary, reaching that server through a TLS terminator with its
// temporal.api_key, exits naming the refusal with a read-only key, and runs a
// deployment end to end with its namespace's admin key, and, the search attributes
// added, with a key of the write role only.
//
//mantis:temporal-server
func TestTemporalAuthorizerRefusesWrongIdentities(t *testing.T) {
	t.Parallel()
	stack := startAuthorizingTemporal(t)
	addr := stack.Env["TEMPORAL_ADDRESS"]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	describe := func(c client.Client) error {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		return err
	}
	start := func(c client.Client, id string) error {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "authorization-probe"}, "Probe")
		return err
	}
	token := func(ttl time.Duration, permissions ...string) string {
		tok, err := stack.TemporalToken("tester", ttl, permissions...)
		require.NoError(t, err)
		return tok
	}

	requirePermissionDenied(t, describe(dialWithToken(t, addr, "")), "no token")

	// Same claims and key id as a token the server accepts, signed by another key.
	good := token(time.Hour, "default:admin")
	parsed, _, err := jwt.NewParser().ParseUnverified(good, jwt.MapClaims{})
	require.NoError(t, err)
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	forged := jwt.NewWithClaims(jwt.SigningMethodES256, parsed.Claims)
	forged.Header["kid"] = parsed.Header["kid"]
	forgedToken, err := forged.SignedString(otherKey)
	require.NoError(t, err)
	requirePermissionDenied(t, describe(dialWithToken(t, addr, forgedToken)), "a token signed by another key")

	requirePermissionDenied(t, describe(dialWithToken(t, addr, token(-time.Minute, "default:admin"))), "an expired token")
	requirePermissionDenied(t, describe(dialWithToken(t, addr, token(time.Hour, "other:admin"))), "a token for another namespace")

	reader := dialWithToken(t, addr, token(time.Hour, "default:read"))
	require.NoError(t, describe(reader), "a reader may describe its namespace")
	requirePermissionDenied(t, start(reader, uniqueName("probe")), "a reader starting a workflow")

	writer := dialWithToken(t, addr, token(time.Hour, "default:write"))
	id := uniqueName("probe")
	// A namespace just registered reaches the history service's cache within seconds.
	var startErr error
	require.Eventually(t, func() bool {
		startErr = start(writer, id)
		var notFound *serviceerror.NamespaceNotFound
		return !errors.As(startErr, &notFound)
	}, time.Minute, 500*time.Millisecond)
	require.NoError(t, startErr, "a writer starts a workflow")
	require.NoError(t, writer.TerminateWorkflow(ctx, id, "", "authorization probe"))

	// Mandible, through a TLS terminator, with the key in its configuration.
	serverCert, serverKey := stack.Certs.Pair("rabbitmq") // a server pair for 127.0.0.1
	st, err := devstack.StartTLSTerminator(ctx, slog.New(slog.DiscardHandler), devstack.TLSTerminatorOptions{
		Dir: t.TempDir(), Backend: addr, CertPath: serverCert, KeyPath: serverKey,
	})
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	f := setupDispatchFixture(t, 1)
	behind := testenv.Temporal{Address: st.Address, Namespace: "default", Kind: testenv.TemporalKindServer}
	replicaEnv := func(key string) []string {
		return []string{"MANTIS_TEMPORAL_CA_CERT_PATH=" + stack.Certs.CACert(), "MANTIS_TEMPORAL_API_KEY=" + key,
			grpcALPNVariable + "=false"}
	}

	refused := launchReplica(t, replicaOptions{ID: uniqueName("readonly"), DatabaseURL: f.url, Temporal: behind,
		Env: replicaEnv(token(time.Hour, "default:read"))})
	select {
	case <-refused.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("Mandible with a read-only Temporal key still runs after 2 minutes:\n%s", refused.log())
	}
	require.Contains(t, refused.log(), "Temporal refused Mandible's identity (permission denied: Request unauthorized.)",
		"Mandible says Temporal refused it")
	require.Contains(t, refused.log(), "needs the admin role on the namespace", "and what would let it in")

	r := startReplica(t, replicaOptions{ID: uniqueName("authorized"), DatabaseURL: f.url, Temporal: behind,
		PollInterval: "1s", Env: replicaEnv(token(time.Hour, "default:admin"))})
	fakeExecutor(t, f, f.targets)
	spec := `{"name":"authorized","targets":["` + f.targets[0] + `"],"steps":[{"name":"only","command":"echo ok"}]}`
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	waitDeployment(t, r, created["id"].(string), "succeeded")

	// Once the attributes exist, the write role is enough: a second replica with it
	// runs the next deployment.
	r.stop(t)
	w := startReplica(t, replicaOptions{ID: uniqueName("writer"), DatabaseURL: f.url, Temporal: behind,
		PollInterval: "1s", Env: replicaEnv(token(time.Hour, "default:write"))})
	code, created = api(t, w, http.MethodPost, "/api/v1/deployments", strings.Replace(spec, `"authorized"`, `"written"`, 1))
	require.Equal(t, http.StatusAccepted, code, created)
	waitDeployment(t, w, created["id"].(string), "succeeded")

	log, err := os.ReadFile(filepath.Join(stack.Dir(), "logs", "temporal.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "Authorization error", "temporal-server logged the refused tokens")
}
