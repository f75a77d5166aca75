package grpcapi_test

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// clientAs dials the bundle's server presenting a pair issued for role and name.
func (b bundle) clientAs(t *testing.T, role identity.Role, name string) mantisv1.MandibleServiceClient {
	t.Helper()
	cert, key, err := b.certs.Issue(role, name, nil)
	require.NoError(t, err)
	return mantisv1.NewMandibleServiceClient(b.dial(t, tlsconf.Files{CA: b.certs.CACert(), Cert: cert, Key: key}))
}

func refusals(t *testing.T, reg *prometheus.Registry, expected, presented string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != identity.RefusalsMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["link"] == identity.LinkMandibleGRPC && labels["expected"] == expected && labels["presented"] == presented {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Only the thorax role may call MandibleService: an agent's certificate (a
// compromised target host), a CLI's, or another Mandible's is refused, saying which
// role was expected and which was presented.
func TestMandibleServiceRefusesOtherRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	for _, caller := range []identity.ID{
		{Role: identity.RoleAgent, Name: "web-1"},
		{Role: identity.RoleClient, Name: "ci"},
		{Role: identity.RoleMandible, Name: "mandible"},
	} {
		c := b.clientAs(t, caller.Role, caller.Name)
		_, err := c.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: "impostor", Version: "x"})
		require.Equal(t, codes.PermissionDenied, code(err), "%v", err)
		require.Equal(t, "thorax role required, certificate presents "+caller.String(), status.Convert(err).Message())
		_, err = c.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst})
		require.Equal(t, codes.PermissionDenied, code(err), "%v", err)
		require.Equal(t, 2.0, refusals(t, b.registry, "thorax", string(caller.Role)))
	}
	var impostors int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM thorax_instances WHERE name = 'impostor'`).Scan(&impostors))
	require.Zero(t, impostors)

	// The shared development client pair is refused too.
	cert, key := b.certs.Pair("client")
	devClient := mantisv1.NewMandibleServiceClient(b.dial(t, tlsconf.Files{CA: b.certs.CACert(), Cert: cert, Key: key}))
	_, err := devClient.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: "impostor"})
	require.Equal(t, "thorax role required, certificate presents client/client", status.Convert(err).Message())
}

// An instance id is bound to the certificate that registered it: another Thorax
// certificate may not heartbeat, claim, store, redispatch or release as it.
func TestInstanceIDIsBoundToItsCertificate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner := b.clientAs(t, identity.RoleThorax, "thorax-1")
	other := b.clientAs(t, identity.RoleThorax, "thorax-2")
	resp, err := owner.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: "thorax-1", Version: "test"})
	require.NoError(t, err)
	inst := resp.GetInstanceId()
	var certName string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT cert_name FROM thorax_instances WHERE id = $1`, inst).Scan(&certName))
	require.Equal(t, "thorax-1", certName)

	_, err = owner.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	cmd := b.dispatch(t, "k1", "web-1", nil)

	want := "instance " + inst + " belongs to certificate thorax/thorax-1, certificate presents thorax/thorax-2"
	calls := map[string]func() error{
		"Heartbeat": func() error {
			_, err := other.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst})
			return err
		},
		"FetchPendingCommands": func() error {
			_, err := other.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 10})
			return err
		},
		"StoreCommandResult": func() error {
			_, err := other.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: inst, CommandId: cmd.String(), LeaseEpoch: 1, Result: &mantisv1.CommandResult{}})
			return err
		},
		"ScheduleRedispatch": func() error {
			_, err := other.ScheduleRedispatch(b.ctx, &mantisv1.ScheduleRedispatchRequest{InstanceId: inst, CommandId: cmd.String(), LeaseEpoch: 1})
			return err
		},
		"ReleaseCommands": func() error {
			_, err := other.ReleaseCommands(b.ctx, &mantisv1.ReleaseCommandsRequest{InstanceId: inst, Commands: []*mantisv1.CommandLease{{CommandId: cmd.String(), LeaseEpoch: 1}}})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		require.Equal(t, codes.PermissionDenied, code(err), "%s: %v", name, err)
		require.Equal(t, want, status.Convert(err).Message(), name)
	}
	require.Equal(t, float64(len(calls)), refusals(t, b.registry, identity.BindingInstance, "other"))

	// Nothing was claimed by the impostor; the owner still claims the command.
	fetched, err := owner.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Len(t, fetched.GetCommands(), 1)
	require.Equal(t, cmd.String(), fetched.GetCommands()[0].GetId())
}

// A plaintext development server (grpc.insecure) has no identities: it neither
// guards nor binds, and Thorax works as before.
func TestInsecureServerBindsNothing(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	srv := grpc.NewServer(grpcapi.ServerOptions(nil)...)
	mantisv1.RegisterMandibleServiceServer(srv, &grpcapi.MandibleService{DB: pool, Logger: testLogger(), HeartbeatTimeout: time.Hour})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := mantisv1.NewMandibleServiceClient(conn)
	resp, err := c.RegisterInstance(t.Context(), &mantisv1.RegisterInstanceRequest{Name: "dev", Version: "test"})
	require.NoError(t, err)
	_, err = c.Heartbeat(t.Context(), &mantisv1.HeartbeatRequest{InstanceId: resp.GetInstanceId()})
	require.NoError(t, err)
	var certName *string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT cert_name FROM thorax_instances WHERE id = $1`, resp.GetInstanceId()).Scan(&certName))
	require.Nil(t, certName)
}
