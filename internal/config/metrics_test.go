package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

const listenAgentFile = `
name = "web-1"
mode = "listen"

[listen]
address = "127.0.0.1:9191"
ca_cert_path = "/certs/ca.crt"
cert_path = "/certs/agent.crt"
key_path = "/certs/agent.key"
`

// A metrics listener without a host would serve on every interface, so it is
// refused with the two ways to write what was meant; a named host, 0.0.0.0
// included, is taken.
func TestMetricsListenMustNameAHost(t *testing.T) {
	t.Parallel()
	const refusal = `metrics.listen: must name a host, got ":9100": write 127.0.0.1:9100 for loopback only, ` +
		`or 0.0.0.0:9100 to listen on all interfaces`

	_, err := config.LoadThorax(writeFile(t, "thorax.toml", thoraxFile+"\n[metrics]\nlisten = \":9100\"\n"), nil)
	require.Equal(t, []string{refusal}, problems(t, err))
	_, err = config.LoadAgent(writeFile(t, "agent.toml", listenAgentFile+"\n[metrics]\nlisten = \":9100\"\n"), nil)
	require.Equal(t, []string{refusal}, problems(t, err))

	for _, addr := range []string{"127.0.0.1:9100", "0.0.0.0:9100", "[::1]:9100", "[::]:9100", "localhost:0"} {
		th, err := config.LoadThorax(writeFile(t, "thorax.toml", thoraxFile), nil)
		require.NoError(t, err)
		th.Metrics.Listen = addr
		require.NoError(t, th.Validate(), addr)
		a, err := config.LoadAgent(writeFile(t, "agent.toml", listenAgentFile), nil)
		require.NoError(t, err)
		a.Metrics.Listen = addr
		require.NoError(t, a.Validate(), addr)
	}
}

// Mandible's profiling listener is off unless set; set, it must name its host like
// the metrics listener, and a named host is taken.
func TestPprofListenIsOffByDefaultAndMustNameAHost(t *testing.T) {
	t.Parallel()
	require.Empty(t, config.DefaultMandible().Debug.PprofListen, "no profiles unless asked for")
	c := validMandible()
	c.Debug.PprofListen = ":6060"
	require.Equal(t, []string{`debug.pprof_listen: must name a host, got ":6060": write 127.0.0.1:6060 for loopback only, ` +
		`or 0.0.0.0:6060 to listen on all interfaces`}, problems(t, c.Validate()))
	c.Debug.PprofListen = "127.0.0.1:6060"
	require.NoError(t, c.Validate())
}
