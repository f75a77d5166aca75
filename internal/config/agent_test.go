package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

func TestAgentExecAndListenDefaults(t *testing.T) {
	t.Parallel()

	a := config.DefaultAgent()
	require.Empty(t, a.Listen.AllowedClientNames, "any certificate of the thorax role by default")
	require.Equal(t, 5*time.Second, a.Exec.KillGrace.Duration)
	require.Equal(t, 15*time.Second, a.Exec.StopTimeout.Duration)
	require.Empty(t, a.Exec.WorkingDir)

	listen, err := config.LoadAgent("../../deploy/agent-listen.toml", nil)
	require.NoError(t, err)
	require.Empty(t, listen.Listen.AllowedClientNames)
}

func TestAgentAllowedClientNames(t *testing.T) {
	t.Parallel()

	a, err := config.LoadAgent(writeFile(t, "agent.toml", `
name = "web-1"
mode = "listen"

[listen]
address = "127.0.0.1:9191"
ca_cert_path = "/certs/ca.crt"
cert_path = "/certs/agent.crt"
key_path = "/certs/agent.key"
allowed_client_names = ["thorax-a"]
`), env(map[string]string{"MANTIS_LISTEN_ALLOWED_CLIENT_NAMES": "thorax-a, thorax-b"}))
	require.NoError(t, err)
	require.Equal(t, []string{"thorax-a", "thorax-b"}, a.Listen.AllowedClientNames)
	require.Contains(t, a.String(), `allowed_client_names = ["thorax-a", "thorax-b"]`)

	cases := []struct {
		change func(*config.Agent)
		want   string
	}{
		{func(c *config.Agent) { c.Listen.AllowedClientNames = []string{"thorax", ""} }, "listen.allowed_client_names: name 2 is empty"},
		{func(c *config.Agent) { c.Exec.WorkingDir = "srv" }, `exec.working_dir: must be an absolute path, got "srv"`},
		{func(c *config.Agent) { c.Exec.KillGrace.Duration = 0 }, "exec.kill_grace: must be positive, got 0s"},
		{func(c *config.Agent) { c.Exec.StopTimeout.Duration = -time.Second }, "exec.stop_timeout: must be positive, got -1s"},
		{func(c *config.Agent) { c.Exec.PassEnv = []string{"HTTP_PROXY", "A=B"} },
			`exec.pass_env: name 2 must be a variable name (letters, digits, _), got "A=B"`},
	}
	for _, tc := range cases {
		c := validAgent(config.ModeListen)
		tc.change(&c)
		require.Equal(t, []string{tc.want}, problems(t, c.Validate()))
	}

	// Names are optional: the thorax role is required whatever they say.
	noNames := validAgent(config.ModeListen)
	noNames.Listen.AllowedClientNames = nil
	require.NoError(t, noNames.Validate())
	insecure := validAgent(config.ModeListen)
	insecure.Listen.Address = "127.0.0.1:9191" // plaintext stays on loopback
	insecure.Listen.Insecure = true
	insecure.Listen.AllowedClientNames = nil
	require.NoError(t, insecure.Validate())
	poll := validAgent(config.ModePoll)
	poll.Listen.AllowedClientNames = nil
	require.NoError(t, poll.Validate())
}

func TestAgentJournalDir(t *testing.T) {
	a, err := config.LoadAgent(writeFile(t, "agent.toml", `
name = "web-1"
mode = "poll"

[thorax]
address = "127.0.0.1:9190"
insecure = true

[journal]
dir = "/srv/journal"
`), env(map[string]string{"MANTIS_JOURNAL_DIR": "/data/mantis/journal"}))
	require.NoError(t, err)
	require.Equal(t, "/data/mantis/journal", a.JournalDir(), "the environment wins over the file")

	a.Journal.Dir = ""
	t.Setenv("STATE_DIRECTORY", "/var/lib/mantis-agent:/var/lib/other")
	require.Equal(t, "/var/lib/mantis-agent/web-1/journal", a.JournalDir(), "under systemd, its state directory")

	a.Journal.Dir = "journal"
	require.Equal(t, []string{`journal.dir: must be an absolute path, got "journal"`}, problems(t, a.Validate()))
}
