package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
)

// shellEnv names the variables a shell sets for itself, which no agent passes.
var shellEnv = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

// A command gets the base environment as the agent has it, the names exec.pass_env
// lists, the step's env and the command's own MANTIS_* ids, and nothing else of the
// agent's environment: not its settings, its env file or its exporter headers. Not
// parallel: it sets the test process's (the agent's) environment.
func TestCommandsGetOnlyTheBaseEnvironment(t *testing.T) {
	t.Setenv("MANTIS_CANARY_SETTING", "agent-setting")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=canary")
	t.Setenv("CANARY_FROM_ENV_FILE", "env-file")
	t.Setenv("HTTPS_PROXY_CANARY", "passed")
	t.Setenv("LC_CANARY", "C")
	t.Setenv("TZ", "UTC")
	r := newRunner(t, func(c *config.Exec) { c.PassEnv = []string{"HTTPS_PROXY_CANARY"} })

	cmd := withRequest(command("env"))
	cmd.Target = "web-1"
	cmd.Env = map[string]string{"STEP_VAR": "step"}
	res, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, int32(0), res.GetExitCode(), string(res.GetOutput()))
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.GetOutput())), "\n") {
		name, value, _ := strings.Cut(line, "=")
		got[name] = value
	}

	require.NotContains(t, got, "MANTIS_CANARY_SETTING")
	require.NotContains(t, got, "OTEL_EXPORTER_OTLP_HEADERS")
	require.NotContains(t, got, "CANARY_FROM_ENV_FILE")
	require.NotEmpty(t, got["PATH"], "the base set passes")
	require.Equal(t, "UTC", got["TZ"])
	require.Equal(t, "C", got["LC_CANARY"], "locale variables pass")
	require.Equal(t, "passed", got["HTTPS_PROXY_CANARY"], "exec.pass_env passes")
	require.Equal(t, "step", got["STEP_VAR"])
	require.Equal(t, "web-1", got[agent.EnvTarget], "the command's own ids are set")
	require.Equal(t, cmd.GetId(), got[agent.EnvCommandID])
	require.Equal(t, cmd.GetDispatchRequestId(), got[agent.EnvDispatchRequestID])

	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TZ": true, "USER": true, "LOGNAME": true,
		"SHELL": true, "TMPDIR": true, "HTTPS_PROXY_CANARY": true, "STEP_VAR": true,
		agent.EnvTarget: true, agent.EnvCommandID: true, agent.EnvDispatchRequestID: true}
	var leaked []string
	for name := range got {
		if !allowed[name] && !shellEnv[name] && !strings.HasPrefix(name, "LC_") {
			leaked = append(leaked, name)
		}
	}
	require.Empty(t, leaked, "variables of the agent's environment reached the command")
}
