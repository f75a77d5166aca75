package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

func TestTracingIsOffByDefaultAndReadsFileAndEnvironment(t *testing.T) {
	t.Parallel()
	th := config.DefaultThorax()
	require.False(t, th.Tracing.Enabled())
	require.Equal(t, "mantis-thorax", th.Tracing.ServiceNameOr("mantis-thorax"))
	require.NoError(t, th.Tracing.Validate())
	ratio, err := th.Tracing.SampleRatio.Value()
	require.NoError(t, err)
	require.InDelta(t, 1.0, ratio, 0)

	a, err := config.LoadAgent(writeFile(t, "agent.toml", `
name = "web-1"
mode = "poll"
[thorax]
address = "127.0.0.1:9190"
insecure = true
[tracing]
endpoint = "http://collector:4318/v1/traces"
sample_ratio = 0.25
service_name = "edge-agent"
`), env(map[string]string{"MANTIS_TRACING_SAMPLE_RATIO": "0.5"}))
	require.NoError(t, err)
	require.True(t, a.Tracing.Enabled())
	require.Equal(t, "edge-agent", a.Tracing.ServiceNameOr("mantis-agent"))
	ratio, err = a.Tracing.SampleRatio.Value()
	require.NoError(t, err)
	require.InDelta(t, 0.5, ratio, 0, "the environment beats the file")
	require.NoError(t, a.Tracing.Validate())
}

func TestTracingValidateNamesEachBadKey(t *testing.T) {
	t.Parallel()
	_, err := config.LoadThorax("", env(map[string]string{"MANTIS_TRACING_SAMPLE_RATIO": "2"}))
	require.ErrorContains(t, err, "MANTIS_TRACING_SAMPLE_RATIO")
	require.ErrorContains(t, err, "tracing.sample_ratio")

	bad := config.Tracing{Endpoint: "collector:4318", SampleRatio: "lots"}
	err = bad.Validate()
	require.ErrorContains(t, err, "tracing.endpoint: must be an http:// or https:// URL")
	require.ErrorContains(t, err, `tracing.sample_ratio: must be a number from 0 to 1, got "lots"`)
}
