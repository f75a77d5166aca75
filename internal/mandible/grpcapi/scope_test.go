package grpcapi_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// A Thorax certificate reaches only the targets thorax.scopes gives it: a stolen
// thorax-eu key may name another target in a heartbeat or a fetch, attract a listen
// target or forward a result, and each is refused or passed over, while the targets
// in its scope work as before. The instances view shows the certificate and the scope.
func TestThoraxCertificateServesOnlyItsScope(t *testing.T) {
	t.Parallel()
	cfg := config.ThoraxHealth{Scopes: map[string]string{"thorax-eu": "web-eu-* region=eu"}}
	b := setupWith(t, func(s *grpcapi.MandibleService) {
		s.ScopeOf = func(cert string) (schema.InstanceScope, bool) {
			sc, scoped := cfg.ScopeOf(cert)
			return schema.InstanceScope{Names: sc.Names, Labels: sc.Labels}, scoped
		}
	})
	eu := b.clientAs(t, identity.RoleThorax, "thorax-eu")
	us := b.clientAs(t, identity.RoleThorax, "thorax-us")
	euInst := registerAs(t, b, eu, "thorax-eu")
	usInst := registerAs(t, b, us, "thorax-us")

	// Heartbeats: the unscoped instance takes web-us-1; the scoped one names it too,
	// and web-eu-1, and gets only web-eu-1.
	_, err := us.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: usInst, PollTargets: []string{"web-us-1"}})
	require.NoError(t, err)
	_, err = eu.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: euInst, PollTargets: []string{"web-us-1", "web-eu-1"}})
	require.NoError(t, err)
	require.Equal(t, usInst, b.assignedTo(t, "web-us-1"), "a heartbeat does not move a target out of scope")
	require.Equal(t, euInst, b.assignedTo(t, "web-eu-1"))

	// A fetch naming a target out of scope claims nothing of it.
	usCmd := b.dispatch(t, "us-1", "web-us-1", nil)
	euCmd := b.dispatch(t, "eu-1", "web-eu-1", nil)
	resp, err := eu.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: euInst, PollTargets: []string{"web-us-1", "web-eu-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	require.Equal(t, euCmd.String(), resp.GetCommands()[0].GetId())
	resp, err = us.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: usInst, PollTargets: []string{"web-us-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	require.Equal(t, usCmd.String(), resp.GetCommands()[0].GetId())

	// A forward for a target out of scope is refused and counted.
	_, err = eu.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: euInst, CommandId: usCmd.String(), LeaseEpoch: 1,
		Target: "web-us-1", Result: &mantisv1.CommandResult{ExitCode: 0}})
	require.Equal(t, codes.PermissionDenied, code(err), "%v", err)
	require.Equal(t, 1.0, refusals(t, b.registry, identity.BindingScope, "other"))

	// Listen targets go only to an instance that may serve them: by name, by a label
	// an admin set, never to the scoped instance otherwise, however few it serves.
	for name, want := range map[string]string{"db-us-1": usInst, "web-eu-listen": euInst} {
		target, err := schema.RegisterTarget(b.ctx, b.pool, schema.NewTarget{Name: name, Mode: schema.ModeListen, Address: "127.0.0.1:1"}, time.Hour)
		require.NoError(t, err)
		require.Equal(t, want, target.AssignedInstanceID.String(), name)
	}
	labelled, err := schema.RegisterTarget(b.ctx, b.pool, schema.NewTarget{Name: "cache-1", Mode: schema.ModeListen, Address: "127.0.0.1:2",
		Labels: map[string]string{"region": "eu"}}, time.Hour)
	require.NoError(t, err)
	require.Contains(t, []string{euInst, usInst}, labelled.AssignedInstanceID.String())
	may, err := schema.InstanceMayReport(b.ctx, b.pool, uuid.MustParse(euInst), uuid.Nil, "cache-1")
	require.NoError(t, err)
	require.True(t, may, "a label an admin set brings a target into scope")

	// A holder's own result is stored whatever its scope says of the target now: an
	// admin relabelling a target does not strand what its instance already runs.
	_, err = schema.RegisterTarget(b.ctx, b.pool, schema.NewTarget{Name: "edge-7", Mode: schema.ModePoll,
		Labels: map[string]string{"region": "eu"}}, time.Hour)
	require.NoError(t, err)
	_, err = eu.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: euInst, PollTargets: []string{"web-eu-1", "edge-7"}})
	require.NoError(t, err)
	edgeCmd := b.dispatch(t, "edge-1", "edge-7", nil)
	resp, err = eu.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: euInst, PollTargets: []string{"edge-7"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	_, err = b.pool.Exec(b.ctx, `UPDATE targets SET labels = '{"region": "us"}' WHERE name = 'edge-7'`)
	require.NoError(t, err)
	_, err = eu.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: euInst, CommandId: edgeCmd.String(), LeaseEpoch: 1,
		Target: "edge-7", Result: &mantisv1.CommandResult{ExitCode: 0}})
	require.NoError(t, err, "the holder's result")

	instances, err := schema.ListThoraxInstances(b.ctx, b.pool, time.Hour)
	require.NoError(t, err)
	byName := map[string]bool{}
	for _, i := range instances {
		require.Equal(t, i.Name, i.CertName)
		byName[i.CertName] = i.Scoped
	}
	require.Equal(t, map[string]bool{"thorax-eu": true, "thorax-us": false}, byName)
}

func registerAs(t *testing.T, b bundle, c mantisv1.MandibleServiceClient, name string) string {
	t.Helper()
	resp, err := c.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: name, Version: "test"})
	require.NoError(t, err)
	return resp.GetInstanceId()
}

// assignedTo is the instance a target is assigned to, as a string ("" for none).
func (b bundle) assignedTo(t *testing.T, target string) string {
	t.Helper()
	var id *string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT assigned_instance_id::text FROM targets WHERE name = $1`, target).Scan(&id))
	if id == nil {
		return ""
	}
	return *id
}
