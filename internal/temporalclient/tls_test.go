package temporalclient_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// alpnVariable switches off gRPC-Go's demand (since 1.67) that a TLS server negotiate
// ALPN: stunnel 5 cannot, where Temporal's frontend, Envoy or nginx negotiate h2. gRPC
// reads it when its package initialises, so TestMain runs the tests again with it set.
const alpnVariable = "GRPC_ENFORCE_ALPN_ENABLED"

func TestMain(m *testing.M) {
	if os.Getenv(alpnVariable) == "" {
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), alpnVariable+"=false")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		if err != nil {
			panic(err)
		}
		os.Exit(0)
	}
	os.Exit(testenv.Main(m))
}

// echoSecret is the workflow of the test: its input and result carry a secret.
func echoSecret(_ workflow.Context, in string) (string, error) { return "ran with " + in, nil }

type tlsSetup struct {
	server   testenv.Temporal
	certs    devcerts.Bundle
	stunnel  *devstack.TLSTerminator
	base     config.Temporal
	keysFile string
}

// setupTLS puts stunnel, requiring client certificates of the development CA, in front
// of the dev server.
func setupTLS(t *testing.T) tlsSetup {
	t.Helper()
	server := testenv.TemporalServer(t)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), nil)
	require.NoError(t, err)
	cert, key := certs.Pair("rabbitmq") // a server pair for 127.0.0.1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := devstack.StartTLSTerminator(ctx, slog.New(slog.DiscardHandler), devstack.TLSTerminatorOptions{
		Dir: dir, Backend: server.Address, CertPath: cert, KeyPath: key, CACertPath: certs.CACert(),
	})
	require.NoError(t, err)
	t.Cleanup(st.Stop)

	keys := filepath.Join(dir, "codec.keys")
	_, err = codec.WriteKeyFile(keys, "test1")
	require.NoError(t, err)
	base := config.DefaultMandible().Temporal
	base.Address, base.Namespace = st.Address, server.Namespace
	return tlsSetup{server: server, certs: certs, stunnel: st, base: base, keysFile: keys}
}

func dial(t *testing.T, cfg config.Temporal) (client.Client, error) {
	t.Helper()
	opts, _, err := temporalclient.Options(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func TestWorkflowRunsOverMutualTLSWithEncryptedPayloads(t *testing.T) {
	t.Parallel()
	s := setupTLS(t)
	cfg := s.base
	cfg.CACertPath = s.certs.CACert()
	cfg.CertPath, cfg.KeyPath = s.certs.Pair("mandible")
	cfg.CodecKeyFile = s.keysFile
	c, err := dial(t, cfg)
	require.NoError(t, err)

	w := worker.New(c, s.server.TaskQueue, worker.Options{})
	w.RegisterWorkflow(echoSecret)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const secret = "s3cret-env-value"
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: s.server.TaskQueue}, echoSecret, secret)
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "ran with "+secret, out)

	// What `temporal workflow show` prints: every payload of the history is ciphertext
	// carrying the codec's encoding and key id.
	iter := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	payloads := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		var all []*[]byte
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			for _, p := range a.GetInput().GetPayloads() {
				require.Equal(t, codec.Encoding, string(p.GetMetadata()[converter.MetadataEncoding]))
				require.Equal(t, "test1", string(p.GetMetadata()[codec.MetadataKeyID]))
				all = append(all, &p.Data)
			}
		}
		if a := ev.GetWorkflowExecutionCompletedEventAttributes(); a != nil {
			for _, p := range a.GetResult().GetPayloads() {
				require.Equal(t, codec.Encoding, string(p.GetMetadata()[converter.MetadataEncoding]))
				all = append(all, &p.Data)
			}
		}
		for _, d := range all {
			require.False(t, bytes.Contains(*d, []byte(secret)), "history holds the secret in clear")
			payloads++
		}
	}
	require.Equal(t, 2, payloads, "the input and the result")
}

func TestTLSTerminatorRefusesWrongIdentities(t *testing.T) {
	t.Parallel()
	s := setupTLS(t)
	other, err := devcerts.Generate(t.TempDir(), nil) // another CA
	require.NoError(t, err)

	plain := s.base
	_, err = dial(t, plain)
	require.Error(t, err, "no TLS")

	noClientCert := s.base
	noClientCert.CACertPath = s.certs.CACert()
	_, err = dial(t, noClientCert)
	require.Error(t, err, "TLS without a client certificate")

	wrongCA := s.base
	wrongCA.CACertPath = s.certs.CACert()
	wrongCA.CertPath, wrongCA.KeyPath = other.Pair("mandible")
	_, err = dial(t, wrongCA)
	require.Error(t, err, "a client certificate of another CA")

	// The same dial with the right pair goes through: the refusals are the identity's.
	right := s.base
	right.CACertPath = s.certs.CACert()
	right.CertPath, right.KeyPath = s.certs.Pair("mandible")
	_, err = dial(t, right)
	require.NoError(t, err)
}
