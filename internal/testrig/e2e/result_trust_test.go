package e2e_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// A result is true whoever lies: while a listen agent runs a command for the Thorax
// that holds it, neither another Thorax certificate (registering an instance of its
// own) nor another target's agent (reporting through a Thorax that does not hold the
// command) can store a result for it. Each refusal names no epoch, and Mandible logs
// and counts it; the command goes on running.
func TestAResultIsTrueWhoeverLies(t *testing.T) {
	t.Parallel()
	s := setupExec(t)
	ctx := t.Context()
	request := s.enqueue(t, schema.NewDispatchRequest{Target: s.listen.Name, Command: "sleep 60", Timeout: 2 * time.Minute})
	cmd := s.waitCommand(t, request, startTimeout, domain.CommandRunning)
	forged := &mantisv1.CommandResult{ExitCode: 0, Output: []byte("forged")}

	// Another Thorax certificate, with an instance of its own.
	rogue := mantisv1.NewMandibleServiceClient(s.dialAs(t, s.mandible.GRPCAddr, identity.RoleThorax, "thorax-rogue"))
	reg, err := rogue.RegisterInstance(ctx, &mantisv1.RegisterInstanceRequest{Name: "thorax-rogue", Version: "test"})
	require.NoError(t, err)
	for _, target := range []string{"", s.listen.Name, s.poll.Name} {
		for _, epoch := range []int64{1, 2} {
			_, err = rogue.StoreCommandResult(ctx, &mantisv1.StoreCommandResultRequest{
				InstanceId: reg.GetInstanceId(), CommandId: cmd.ID.String(), LeaseEpoch: epoch, Target: target, Result: forged,
			})
			require.Equal(t, codes.PermissionDenied, status.Code(err), "target %q, epoch %d: %v", target, epoch, err)
			require.NotContains(t, status.Convert(err).Message(), "epoch "+string(rune('0'+epoch)), "a refusal names no epoch")
		}
	}

	// Another target's agent, through a Thorax that does not hold the command.
	other := s.startThorax(t)
	s.waitRegistered(t, other)
	agent := mantisv1.NewThoraxServiceClient(s.dialAs(t, other.AgentsAddr, identity.RoleAgent, s.poll.Name))
	_, err = agent.ReportResult(ctx, &mantisv1.ReportResultRequest{
		Target: s.poll.Name, CommandId: cmd.ID.String(), LeaseEpoch: 1, Result: forged,
	})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "mandible refused the result")

	got, ok, err := s.command(request)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, domain.CommandRunning, got.Status, "no forged result was stored")
	require.Nil(t, got.ExitCode)
	require.Eventually(t, func() bool {
		n, _ := sampleSum(scrapeText(t, s.mandible.HTTPAddr), "mantis_auth_refusals_total",
			map[string]string{"link": identity.LinkMandibleGRPC, "expected": identity.BindingCommand})
		return n == 7
	}, 10*time.Second, 100*time.Millisecond, "six refusals of the rogue Thorax and one of the forward are counted")
	require.Contains(t, s.mandible.log(), "refused call for what it names")
}
