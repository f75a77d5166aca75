package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// httpsCall makes a GET over client with an optional bearer token; 0 on a transport error.
func httpsCall(client *http.Client, url, secret string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// requireSSEOverTLS opens the event stream at url over client with secret and reads
// it up to its ": live" comment: an SSE stream, served over TLS.
func requireSSEOverTLS(t *testing.T, client *http.Client, url, secret string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS, "the stream came over TLS")
	require.True(t, resp.TLS.HandshakeComplete)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if lines.Text() == ": live" {
			return
		}
	}
	require.FailNow(t, "the stream ended before going live", "%v", lines.Err())
}

// A Mandible serving HTTPS with a token file: plain HTTP is refused, and a token
// removed from the file stops working after a real SIGHUP, without a restart.
func TestServeHTTPSWithTokenFileReloadedOnSIGHUP(t *testing.T) {
	t.Parallel()
	bin := testenv.Binary(t, "mandible")
	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	httpPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	databaseURL := testenv.DatabaseURL(t)
	temporal := testenv.TemporalServer(t)
	cert, key := certs.Pair("mandible")

	oldSecret, newSecret := "old-secret-0123456789abcdef", "new-secret-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "tokens.toml")
	require.NoError(t, os.WriteFile(tokenFile, []byte(apitoken.FileLine("ci", apitoken.ScopeRead, oldSecret)), 0o600))
	config := writeConfig(t, fmt.Sprintf(`
replica_id = "https-test"

[database]
url = %q
max_conns = 4

[temporal]
address = %q
namespace = %q
deployment_task_queue = %q

[http]
listen = "127.0.0.1:%d"
cert_path = %q
key_path = %q
token_file = %q

[grpc]
listen = "127.0.0.1:0"
insecure = true
`, databaseURL, temporal.Address, temporal.Namespace, temporal.TaskQueue, httpPort, cert, key, tokenFile))
	mandible := start(t, bin, "--config", config)

	caPEM, err := os.ReadFile(certs.CACert())
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	base := fmt.Sprintf("https://127.0.0.1:%d", httpPort)
	api := base + "/api/v1/deployments"

	mandible.eventually(t, "the API answering over HTTPS", func() bool { return httpsCall(client, base+"/healthz", "") == http.StatusOK })
	require.Equal(t, http.StatusOK, httpsCall(client, api, oldSecret))
	require.Equal(t, http.StatusUnauthorized, httpsCall(client, api, newSecret))

	// The event stream is served over the same TLS listener, to the same tokens.
	requireSSEOverTLS(t, client, base+"/sse/events", oldSecret)
	require.Equal(t, http.StatusUnauthorized, httpsCall(client, base+"/sse/events", newSecret))

	// Plain HTTP on the TLS port is not served, for the API nor the event stream.
	plain := httpsCall(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/api/v1/deployments", httpPort), oldSecret)
	require.NotEqual(t, http.StatusOK, plain, "plain HTTP reached the API")
	plain = httpsCall(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/sse/events", httpPort), oldSecret)
	require.NotEqual(t, http.StatusOK, plain, "plain HTTP reached the event stream")

	// Revoke the old token, add the new one, and signal.
	require.NoError(t, os.WriteFile(tokenFile, []byte(apitoken.FileLine("ci-2", apitoken.ScopeRead, newSecret)), 0o600))
	require.NoError(t, mandible.cmd.Process.Signal(syscall.SIGHUP))
	mandible.eventually(t, "the revoked token refused", func() bool { return httpsCall(client, api, oldSecret) == http.StatusUnauthorized })
	require.Equal(t, http.StatusOK, httpsCall(client, api, newSecret))
	require.Contains(t, mandible.log(), "re-read the API tokens")

	// A file that no longer reads leaves the tokens in force.
	require.NoError(t, os.WriteFile(tokenFile, []byte("[[tokens]]\nname = \"x\"\nscope = \"root\"\n"), 0o600))
	require.NoError(t, mandible.cmd.Process.Signal(syscall.SIGHUP))
	mandible.eventually(t, "the failed re-read logged", func() bool {
		return strings.Contains(mandible.log(), "the previous tokens stay in force")
	})
	require.Equal(t, http.StatusOK, httpsCall(client, api, newSecret))
}

func TestCheckConfigRefusesPlainHTTPOffLoopback(t *testing.T) {
	isolateEnv(t)
	config := writeConfig(t, `
[database]
url = "postgres://db/mantis"

[http]
listen = "0.0.0.0:8080"
token_file = "/etc/mantis/tokens.toml"

[grpc]
insecure = true
`)
	_, err := execute(t, "check-config", "--config", config)
	require.ErrorContains(t, err, `http.listen: plain HTTP on "0.0.0.0:8080", which is not a loopback address`)

	t.Setenv("MANTIS_HTTP_ALLOW_PLAINTEXT", "true")
	_, err = execute(t, "check-config", "--config", config)
	require.NoError(t, err)
}
