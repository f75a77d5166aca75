package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/schema"
)

// devEnvForTest is what a started stack's environment holds for the configurations.
func devEnvForTest() map[string]string {
	return map[string]string{
		"DATABASE_URL":     "postgres://mantis:pw@127.0.0.1:5433/mantis?sslmode=disable",
		"TEMPORAL_ADDRESS": "127.0.0.1:7233", "TEMPORAL_NAMESPACE": "default", "TEMPORAL_UI_URL": "http://127.0.0.1:8233",
		"MANTIS_AMQP_HOST": "127.0.0.1", "MANTIS_AMQP_PORT": "5671", "MANTIS_AMQP_VHOST": "mantis",
		"MANTIS_AMQP_MANDIBLE_USER": "mandible", "MANTIS_AMQP_MANDIBLE_PASSWORD": "mpw",
		"MANTIS_AMQP_THORAX_USER": "thorax", "MANTIS_AMQP_THORAX_PASSWORD": "tpw",
		"MANTIS_CLIENT_CERT": "/certs/client.crt", "MANTIS_CLIENT_KEY": "/certs/client.key",
	}
}

// TestDevConfigsReadBackAsWritten writes each process's configuration as dev up does
// and loads it with the process's own loader: every value comes back.
func TestDevConfigsReadBackAsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := devFiles{dir: dir, certs: devcerts.Bundle{Dir: dir + "/certs"}, codecKeys: dir + "/codec.keys", tokenFile: dir + "/config/tokens.toml"}
	e := devEnvForTest()

	mandible, err := mandibleDevConfig(e, files)
	require.NoError(t, err)
	path, err := writeTOML(dir, "mandible.toml", mandible)
	require.NoError(t, err)
	loadedMandible, err := config.LoadMandible(path, nil)
	require.NoError(t, err)
	require.Equal(t, mandible, loadedMandible)
	require.Equal(t, "postgres://mantis:pw@127.0.0.1:5433/mantis?sslmode=disable", loadedMandible.Database.URL)
	require.Equal(t, 5671, loadedMandible.Queue.Port)
	require.Equal(t, "mpw", loadedMandible.Queue.Password)
	require.Equal(t, devGRPCAddr, loadedMandible.GRPC.Listen)

	thorax, err := thoraxDevConfig(e, files)
	require.NoError(t, err)
	path, err = writeTOML(dir, "thorax.toml", thorax)
	require.NoError(t, err)
	loadedThorax, err := config.LoadThorax(path, nil)
	require.NoError(t, err)
	require.Equal(t, thorax, loadedThorax)
	require.Equal(t, 2*time.Second, loadedThorax.Polling.Interval.Duration)
	require.Equal(t, 10*time.Second, loadedThorax.Drain.Timeout.Duration)
	require.Equal(t, "thorax", loadedThorax.Queue.Username)

	for _, a := range []struct{ name, mode string }{{devPollTarget, schema.ModePoll}, {devListenTarget, schema.ModeListen}} {
		agent := agentDevConfig(files, a.name, a.mode)
		path, err := writeTOML(dir, a.name+".toml", agent)
		require.NoError(t, err)
		loaded, err := config.LoadAgent(path, nil)
		require.NoError(t, err)
		require.Equal(t, agent, loaded)
		require.Equal(t, a.mode, loaded.Mode)
	}
}

func TestDevConfigRefusesABadBrokerPort(t *testing.T) {
	t.Parallel()
	e := devEnvForTest()
	e["MANTIS_AMQP_PORT"] = "amqps"
	_, err := thoraxDevConfig(e, devFiles{dir: t.TempDir()})
	require.ErrorContains(t, err, "MANTIS_AMQP_PORT")
}
