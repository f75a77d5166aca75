package agent_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
)

// A command sees its dispatch request id, command id and target in its environment,
// and a step's own env cannot mask them: the fault suite's ledger keys on them.
func TestCommandSeesItsDispatchIdentity(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)
	cmd := command(`printf '%s|%s|%s' "$` + agent.EnvDispatchRequestID + `" "$` + agent.EnvCommandID + `" "$` + agent.EnvTarget + `"`)
	cmd.DispatchRequestId = uuid.NewString()
	cmd.Env = map[string]string{agent.EnvDispatchRequestID: "spoofed", agent.EnvTarget: "spoofed"}
	res, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, int32(0), res.ExitCode, string(res.Output))
	require.Equal(t, cmd.DispatchRequestId+"|"+cmd.Id+"|"+cmd.Target, string(res.Output))
}
