package e2e_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// grpcALPNVariable switches off gRPC-Go's demand that a TLS server negotiate ALPN:
// stunnel 5 cannot (Temporal's frontend, Envoy and nginx do), so Mandible runs with
// it set when stunnel stands in for a TLS frontend.
const grpcALPNVariable = "GRPC_ENFORCE_ALPN_ENABLED"

// A Mandible configured through its MANTIS_TEMPORAL_* environment for a Temporal
// frontend that requires mutual TLS (the dev server behind stunnel, which refuses
// any client without a certificate of its CA) runs a deployment end to end, and
// the deployment's input reaches the history sealed by the codec.
func TestDeploymentRunsWithMandibleBehindATLSTerminator(t *testing.T) {
	t.Parallel()
	f := setupDispatchFixture(t, 1)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), nil)
	require.NoError(t, err)
	serverCert, serverKey := certs.Pair("rabbitmq") // a server pair for 127.0.0.1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := devstack.StartTLSTerminator(ctx, slog.New(slog.DiscardHandler), devstack.TLSTerminatorOptions{
		Dir: dir, Backend: f.temporal.Address, CertPath: serverCert, KeyPath: serverKey, CACertPath: certs.CACert(),
	})
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	keyFile := filepath.Join(t.TempDir(), "codec.keys")
	_, err = codec.WriteKeyFile(keyFile, "tls1")
	require.NoError(t, err)

	behind := f.temporal
	behind.Address = st.Address // the replica's only way to Temporal
	cert, key := certs.Pair("mandible")
	r := startReplica(t, replicaOptions{ID: uniqueName("tlsfront"), DatabaseURL: f.url, Temporal: behind, PollInterval: "1s",
		Env: []string{
			"MANTIS_TEMPORAL_CA_CERT_PATH=" + certs.CACert(),
			"MANTIS_TEMPORAL_CERT_PATH=" + cert,
			"MANTIS_TEMPORAL_KEY_PATH=" + key,
			"MANTIS_TEMPORAL_CODEC_KEY_FILE=" + keyFile,
			grpcALPNVariable + "=false",
		}})
	fakeExecutor(t, f, f.targets)

	spec := `{"name":"behind-stunnel","targets":["` + f.targets[0] + `"],"steps":[{"name":"only","command":"echo tls-front"}]}`
	code, created := api(t, r, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	waitDeployment(t, r, id, "succeeded")
	requireSealedInput(t, startInput(t, id), "behind-stunnel", "tls-front")

	// The replica's Temporal traffic went through the terminator.
	log, err := os.ReadFile(filepath.Join(dir, "stunnel.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "accepted connection")
}
