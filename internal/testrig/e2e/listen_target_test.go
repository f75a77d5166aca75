package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// A listen call goes to the right host, with the processes as shipped. Target
// A is registered at the address where the agent of another target, B, serves
// (a mistyped address, or a host that took another's place): Thorax refuses
// B's certificate at the handshake, so A's command never runs on B's host, and
// the delivery is given back with a reason naming A and B. And B's agent, handed
// A's command directly by a caller with a Thorax certificate, refuses it naming
// both targets.
func TestListenCallsGoOnlyToTheirOwnTarget(t *testing.T) {
	t.Parallel()
	s := setupExec(t)
	other := s.startListenAgent(t)
	nameA := uniqueName("listen-a")
	target, err := schema.RegisterTarget(s.ctx, s.pool,
		schema.NewTarget{Name: nameA, Mode: schema.ModeListen, Address: other.Addr}, s.heartbeatTimeout)
	require.NoError(t, err)
	require.NotNil(t, target.AssignedInstanceID)

	marker := filepath.Join(t.TempDir(), "ran")
	request := s.enqueue(t, schema.NewDispatchRequest{Target: nameA, Command: "touch " + marker, Timeout: 30 * time.Second})
	cmd := s.waitCommand(t, request, commandTimeout, "cancelled", "succeeded", "failed")
	require.Equal(t, "cancelled", cmd.Status, "the command of %s at %s (the agent of %s) was not given back", nameA, other.Addr, other.Name)
	require.NotNil(t, cmd.Error)
	require.Contains(t, *cmd.Error, "listen agent "+nameA+" at "+other.Addr)
	require.Contains(t, *cmd.Error, "is agent/"+other.Name+", expected agent/"+nameA)
	require.NoFileExists(t, marker, "the command of %s ran on the host of %s", nameA, other.Name)
	require.Contains(t, s.thorax.log(), "refused handshake for its identity")

	// The agent of B itself refuses A's command, whoever hands it over.
	asThorax := mantisv1.NewAgentServiceClient(s.dialAs(t, other.Addr, identity.RoleThorax, "thorax-other"))
	id := uuid.NewString()
	_, err = asThorax.RunCommand(s.ctx, &mantisv1.RunCommandRequest{Command: &mantisv1.Command{
		Id: id, Target: nameA, Mode: schema.ModeListen, Command: "touch " + marker,
	}})
	requireRefused(t, err, "command "+id+` is for target "`+nameA+`", this agent serves target "`+other.Name+`"`)
	require.NoFileExists(t, marker)
	require.Contains(t, other.log(), "refused call for what it names")
	require.False(t, s.thorax.exited())
}
