package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

func TestThoraxHandOffDefaults(t *testing.T) {
	t.Parallel()

	th := config.DefaultThorax()
	require.Equal(t, 256, th.Polling.MaxHeldCommands)
	require.Equal(t, 64, th.Agents.MaxConcurrentCalls)
	require.Equal(t, 25*time.Second, th.Drain.Timeout.Duration)
}

func TestThoraxHandOffProblemsNameTheirKeys(t *testing.T) {
	t.Parallel()

	th := validThorax()
	th.Polling.MaxHeldCommands = 0
	th.Agents.MaxConcurrentCalls = -1
	th.Drain.Timeout.Duration = 0
	require.Equal(t, []string{
		"agents.max_concurrent_calls: must be positive, got -1",
		"drain.timeout: must be positive, got 0s",
		"polling.max_held_commands: must be positive, got 0",
	}, problems(t, th.Validate()))
}

func TestThoraxHandOffKeysLoadFromFileAndEnvironment(t *testing.T) {
	t.Parallel()

	c, err := config.LoadThorax(writeFile(t, "thorax.toml", thoraxFile+`
max_concurrent_calls = 8

[drain]
timeout = "40s"
`), env(map[string]string{"MANTIS_POLLING_MAX_HELD_COMMANDS": "32"}))
	require.NoError(t, err)
	require.Equal(t, 8, c.Agents.MaxConcurrentCalls)
	require.Equal(t, 40*time.Second, c.Drain.Timeout.Duration)
	require.Equal(t, 32, c.Polling.MaxHeldCommands)
	require.Contains(t, c.String(), "max_concurrent_calls = 8")
}
