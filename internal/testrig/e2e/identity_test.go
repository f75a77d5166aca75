package e2e_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// dialAs connects to addr over mutual TLS presenting a pair of the cluster's CA
// issued for role and name.
func (c *execCluster) dialAs(t *testing.T, addr string, role identity.Role, name string) *grpc.ClientConn {
	t.Helper()
	cert, key := c.issue(t, role, name)
	tc, err := tlsconf.Client(tlsconf.Files{CA: c.certs.CACert(), Cert: cert, Key: key}, "localhost")
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func requireRefused(t *testing.T, err error, msg string) {
	t.Helper()
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, msg, status.Convert(err).Message())
}

// The processes as shipped check identities on each gRPC link: Mandible admits
// only Thorax certificates, and each instance id only from the certificate that
// registered it; Thorax's agent port admits only agents, each for its own target;
// a listen agent admits only Thorax. Each refusal comes from a real certificate of
// the cluster's CA with the wrong role or name.
func TestEachLinkRefusesTheWrongIdentity(t *testing.T) {
	t.Parallel()
	s := setupExec(t)
	ctx := t.Context()

	// Mandible's gRPC: a compromised target host (an agent's certificate) may not
	// register as a Thorax; another Thorax may not act as this one.
	asAgent := mantisv1.NewMandibleServiceClient(s.dialAs(t, s.mandible.GRPCAddr, identity.RoleAgent, s.poll.Name))
	_, err := asAgent.RegisterInstance(ctx, &mantisv1.RegisterInstanceRequest{Name: "impostor"})
	requireRefused(t, err, "thorax role required, certificate presents agent/"+s.poll.Name)
	asClient := mantisv1.NewMandibleServiceClient(s.dialAs(t, s.mandible.GRPCAddr, identity.RoleClient, "ci"))
	_, err = asClient.RegisterInstance(ctx, &mantisv1.RegisterInstanceRequest{Name: "impostor"})
	requireRefused(t, err, "thorax role required, certificate presents client/ci")
	otherThorax := mantisv1.NewMandibleServiceClient(s.dialAs(t, s.mandible.GRPCAddr, identity.RoleThorax, "thorax-other"))
	_, err = otherThorax.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{
		InstanceId: s.instance.String(), PollTargets: []string{s.poll.Name}, MaxCommands: 10,
	})
	requireRefused(t, err, "instance "+s.instance.String()+" belongs to certificate thorax/"+s.thorax.Name+
		", certificate presents thorax/thorax-other")

	// Thorax's agent port: a Thorax certificate is refused; an agent polls only
	// for its own target.
	asThorax := mantisv1.NewThoraxServiceClient(s.dialAs(t, s.thorax.AgentsAddr, identity.RoleThorax, "thorax-other"))
	_, err = asThorax.PollCommands(ctx, &mantisv1.PollCommandsRequest{Target: s.poll.Name, MaxCommands: 1})
	requireRefused(t, err, "agent role required, certificate presents thorax/thorax-other")
	otherAgent := mantisv1.NewThoraxServiceClient(s.dialAs(t, s.thorax.AgentsAddr, identity.RoleAgent, s.listen.Name))
	_, err = otherAgent.PollCommands(ctx, &mantisv1.PollCommandsRequest{Target: s.poll.Name, MaxCommands: 1})
	requireRefused(t, err, `target "`+s.poll.Name+`" requires certificate agent/`+s.poll.Name+
		", certificate presents agent/"+s.listen.Name)

	// A listen agent: another agent's certificate is refused.
	asAgentToAgent := mantisv1.NewAgentServiceClient(s.dialAs(t, s.listen.Addr, identity.RoleAgent, s.poll.Name))
	_, err = asAgentToAgent.CancelCommand(ctx, &mantisv1.CancelCommandRequest{CommandId: "x"})
	requireRefused(t, err, "thorax role required, certificate presents agent/"+s.poll.Name)

	// Nothing registered for the impostors, and the real instance goes on.
	var instances int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM thorax_instances`).Scan(&instances))
	require.Equal(t, 1, instances)
	var certName string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT cert_name FROM thorax_instances WHERE id = $1`, s.instance).Scan(&certName))
	require.Equal(t, s.thorax.Name, certName)
	require.Contains(t, s.mandible.log(), "refused call for its identity")
	require.Contains(t, s.thorax.log(), "refused call for what it names")
	require.Contains(t, s.listen.log(), "refused call for its identity")
	require.False(t, s.thorax.exited())
}
