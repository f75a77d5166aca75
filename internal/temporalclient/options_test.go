package temporalclient_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
)

// recordingFrontend is a TLS gRPC server that answers every call Unimplemented and
// hands the authorization header of each call to seen.
func recordingFrontend(t *testing.T, certs devcerts.Bundle) (addr string, seen <-chan string) {
	t.Helper()
	cert, key := certs.Pair("rabbitmq") // a server pair naming 127.0.0.1
	pair, err := tls.LoadX509KeyPair(cert, key)
	require.NoError(t, err)
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	ch := make(chan string, 100)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			md, _ := metadata.FromIncomingContext(stream.Context())
			select {
			case ch <- firstOf(md.Get("authorization")):
			default:
			}
			return status.Error(codes.Unimplemented, "recording frontend")
		}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), ch
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func TestAPIKeyReachesTheFrontend(t *testing.T) {
	t.Parallel()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	addr, seen := recordingFrontend(t, certs)

	cfg := config.DefaultMandible().Temporal
	cfg.Address, cfg.APIKey, cfg.CACertPath = addr, "tmprl-api-key-for-test", certs.CACert()
	opts, c, err := temporalclient.Options(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Nil(t, c, "no codec keys, no codec")
	require.NotNil(t, opts.ConnectionOptions.TLS, "an API key travels over TLS only")
	require.NotNil(t, opts.Credentials)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.DialContext(ctx, opts)
	if err == nil {
		cl.Close()
	}
	select {
	case got := <-seen:
		require.Equal(t, "Bearer tmprl-api-key-for-test", got)
	case <-ctx.Done():
		t.Fatal("the frontend saw no call")
	}
}

func TestOptionsFromKeysAndProfile(t *testing.T) {
	// A profile yields to the TEMPORAL_* variables, as in the temporal CLI; the test
	// runs without those its stack exports.
	for _, v := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE"} {
		t.Setenv(v, "")
		require.NoError(t, os.Unsetenv(v))
	}
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, key := certs.Pair("mandible")
	cfg := config.DefaultMandible().Temporal
	cfg.CACertPath, cfg.CertPath, cfg.KeyPath, cfg.ServerName = certs.CACert(), cert, key, "temporal.example"
	opts, _, err := temporalclient.Options(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "temporal.example", opts.ConnectionOptions.TLS.ServerName)
	require.Len(t, opts.ConnectionOptions.TLS.Certificates, 1)
	require.NotNil(t, opts.ConnectionOptions.TLS.RootCAs)
	require.Nil(t, opts.Credentials)

	// A profile of the temporal CLI's configuration file describes the connection instead.
	dir := t.TempDir()
	file := filepath.Join(dir, "temporal.toml")
	require.NoError(t, os.WriteFile(file, []byte(`[profile.prod]
address = "prod.tmprl.cloud:7233"
namespace = "mantis.prod"
api_key = "from-the-profile"
`), 0o600))
	cfg = config.DefaultMandible().Temporal
	cfg.Profile, cfg.ConfigFile = "prod", file
	cfg.CodecKeyFile = filepath.Join(dir, "codec.keys")
	_, err = codec.WriteKeyFile(cfg.CodecKeyFile, "k1")
	require.NoError(t, err)
	opts, c, err := temporalclient.Options(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "prod.tmprl.cloud:7233", opts.HostPort)
	require.Equal(t, "mantis.prod", opts.Namespace)
	require.NotNil(t, opts.Credentials)
	require.NotNil(t, c)
	require.NotNil(t, opts.DataConverter)
}
