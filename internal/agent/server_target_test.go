package agent_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// The listen agent of web-1 runs only web-1's commands: a Thorax certificate
// (genuine, or stolen) that hands it a command for web-2 is refused with
// PermissionDenied naming both targets, nothing runs or is journaled, and the
// refusal is counted. The same command for web-1 runs.
func TestListenRefusesACommandForAnotherTarget(t *testing.T) {
	t.Parallel()
	s := setupListen(t, nil)
	client, _ := s.thorax(t)
	marker := filepath.Join(t.TempDir(), "ran")

	foreign := withRequest(command("touch " + marker))
	foreign.Target = "web-2"
	_, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: foreign})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "a command for web-2 answered: %v", err)
	require.Equal(t, `command `+foreign.GetId()+` is for target "web-2", this agent serves target "web-1"`,
		status.Convert(err).Message())
	require.NoFileExists(t, marker, "the command of another target ran")
	require.Equal(t, 1.0, refusalsOf(t, s.registry, identity.LinkListenAgent, identity.BindingTarget, "other"))

	// A redelivery for the agent's own target is not held back by the refusal:
	// the request never ran, so it runs now.
	own := redeliver(foreign)
	own.Target = "web-1"
	resp, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: own})
	require.NoError(t, err)
	require.Equal(t, int32(0), resp.GetResult().GetExitCode())
	require.FileExists(t, marker)
}
