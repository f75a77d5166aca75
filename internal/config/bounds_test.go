package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// The bounds of Mandible's HTTP server and event streams have defaults, and Validate
// names each key that is out of range, and a stream cap that leaves the API no
// connection.
func TestMandibleBoundsDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	d := config.DefaultMandible()
	require.EqualValues(t, 8<<20, d.HTTP.MaxCodecBodyBytes)
	require.Equal(t, 1024, d.HTTP.MaxConnections)
	require.Equal(t, "10s", d.HTTP.ReadHeaderTimeout.String())
	require.Equal(t, "1m0s", d.HTTP.ReadTimeout.String())
	require.Equal(t, "2m0s", d.HTTP.WriteTimeout.String())
	require.Equal(t, "2m0s", d.HTTP.IdleTimeout.String())
	require.Equal(t, config.SSE{MaxStreams: 512, MaxStreamsPerCaller: 32, MaxReplayEvents: 50000}, d.SSE)

	c := d
	c.Database.URL = "postgres://mantis@127.0.0.1/mantis"
	c.HTTP.Tokens = []string{"0123456789abcdef-token"}
	c.GRPC.Insecure = true
	require.NoError(t, c.Validate())

	c.HTTP.MaxCodecBodyBytes = 0
	c.HTTP.IdleTimeout.Duration = 0
	c.HTTP.MaxConnections = 100
	c.SSE.MaxStreams = 100
	c.SSE.MaxStreamsPerCaller = 101
	c.SSE.MaxReplayEvents = -1
	err := c.Validate()
	for _, want := range []string{
		"http.max_codec_body_bytes: must be positive, got 0",
		"http.idle_timeout: must be positive",
		"sse.max_streams: must be below http.max_connections (100)",
		"sse.max_streams_per_caller: must be at most sse.max_streams (100), got 101",
		"sse.max_replay_events: must be positive, got -1",
	} {
		require.ErrorContains(t, err, want)
	}
}
