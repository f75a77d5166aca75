package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A command run by a real agent gets the base environment, exec.pass_env and its
// step's env, and none of the agent process's other variables: not the agent's own
// MANTIS_* settings, not its exporter headers, not what its env file set.
func TestAgentCommandsGetOnlyTheBaseEnvironment(t *testing.T) {
	t.Parallel()
	c := setupExecCluster(t, 10*time.Second)
	c.extraConfig = map[string]string{"agent": "pass_env = [\"PASSED_CANARY\"]\n"} // in agentExecConfig's [exec]
	c.extraEnv = map[string][]string{"agent": {
		"MANTIS_LOG_LEVEL=debug",
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=canary",
		"CANARY_FROM_ENV_FILE=env-file",
		"PASSED_CANARY=passed",
	}}
	th := c.startThorax(t)
	agent := c.startPollAgent(t, th)
	c.waitPollTarget(t, agent, c.waitRegistered(t, th))

	spec := fmt.Sprintf(`{"name":"env","targets":[%q],"steps":[{"name":"env","command":"env","env":{"STEP_VAR":"step"}}]}`, agent.Name)
	code, created := api(t, c.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	waitDeployment(t, c.mandible.replica, id, "succeeded")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(storedOutput(t, c.mandible.replica, id, agent.Name))), "\n") {
		name, value, _ := strings.Cut(line, "=")
		got[name] = value
	}
	require.Contains(t, agent.log(), "DEBUG", "the agent itself read MANTIS_LOG_LEVEL")
	for _, name := range []string{"MANTIS_LOG_LEVEL", "OTEL_EXPORTER_OTLP_HEADERS", "CANARY_FROM_ENV_FILE"} {
		require.NotContains(t, got, name, "the agent's %s reached the command", name)
	}
	require.NotEmpty(t, got["PATH"], "the base set reaches the command")
	require.Equal(t, "passed", got["PASSED_CANARY"], "exec.pass_env reaches the command")
	require.Equal(t, "step", got["STEP_VAR"])
	require.Equal(t, agent.Name, got["MANTIS_TARGET"])
}
