package grpcapi_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type bundle struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	client mantisv1.MandibleServiceClient
	addr   string
	certs  devcerts.Bundle
	// registry holds the guard's refusal counter.
	registry *prometheus.Registry
}

func setup(t *testing.T) bundle {
	t.Helper()
	return setupWith(t, func(*grpcapi.MandibleService) {})
}

// setupWith is setup with the service changed by configure before it serves.
func setupWith(t *testing.T, configure func(*grpcapi.MandibleService)) bundle {
	t.Helper()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	allowParallel(t, pool) // many commands of one target at once
	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	cert, key := certs.Pair("mandible")
	serverTLS, err := tlsconf.Server(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key})
	require.NoError(t, err)
	registry := prometheus.NewRegistry()
	guard := grpcapi.NewGuard(testLogger(), identity.NewMetrics(registry))
	srv := grpc.NewServer(append(grpcapi.ServerOptions(guard), grpc.Creds(credentials.NewTLS(serverTLS)))...)
	svc := &grpcapi.MandibleService{DB: pool, Logger: testLogger(), HeartbeatTimeout: time.Hour, Guard: guard}
	configure(svc)
	mantisv1.RegisterMandibleServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	b := bundle{ctx: ctx, pool: pool, addr: lis.Addr().String(), certs: certs, registry: registry}
	tc, tk := certs.Pair("thorax")
	conn := b.dial(t, tlsconf.Files{CA: certs.CACert(), Cert: tc, Key: tk})
	b.client = mantisv1.NewMandibleServiceClient(conn)
	return b
}

func (b bundle) dial(t *testing.T, f tlsconf.Files) *grpc.ClientConn {
	t.Helper()
	cfg, err := tlsconf.Client(f, "localhost")
	require.NoError(t, err)
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (b bundle) register(t *testing.T, name string) string {
	t.Helper()
	resp, err := b.client.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: name, Version: "test"})
	require.NoError(t, err)
	return resp.GetInstanceId()
}

// dispatch enqueues, claims and delivers one request for target, leaving a queued command.
func (b bundle) dispatch(t *testing.T, key, target string, deployment *uuid.UUID) uuid.UUID {
	t.Helper()
	r := schema.NewDispatchRequest{IdempotencyKey: key, Target: target, Command: "echo hi", Priority: "normal"}
	if deployment != nil {
		zero := 0
		r.DeploymentID, r.StepPosition = deployment, &zero
	}
	_, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{r})
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, "r1", 10)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, 1)
	out, err := schema.DeliverClaimed(b.ctx, b.pool, "r1", []domain.ClaimRef{{ID: claim.Claimed[0].ID, Epoch: claim.Claimed[0].Epoch}},
		schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out[0].Outcome, out[0].Error)
	return *out[0].CommandID
}

func code(err error) codes.Code { return status.Code(err) }

func TestPollTargetCommandRunsAndResultIsStoredOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err, "a heartbeat registers the poll targets whose agents poll the instance")
	cmdID := b.dispatch(t, "k1", "web-1", nil)

	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	c := resp.GetCommands()[0]
	require.Equal(t, cmdID.String(), c.GetId())
	require.Equal(t, "echo hi", c.GetCommand())
	require.Equal(t, "poll", c.GetMode())
	require.Equal(t, int64(1), c.GetLeaseEpoch())

	again, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 10})
	require.NoError(t, err)
	require.Empty(t, again.GetCommands(), "a held command is not handed out twice")

	store := &mantisv1.StoreCommandResultRequest{InstanceId: inst, CommandId: c.GetId(), LeaseEpoch: 1, Result: &mantisv1.CommandResult{
		ExitCode: 0, Output: []byte("hi\n"), StartedAt: timestamppb.Now(), FinishedAt: timestamppb.Now(),
	}}
	_, err = b.client.StoreCommandResult(b.ctx, store)
	require.NoError(t, err)
	_, err = b.client.StoreCommandResult(b.ctx, store)
	require.NoError(t, err, "a retried store of the same result is accepted")

	var st, out string
	var exit int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status, exit_code, output FROM command_queue WHERE id = $1`, cmdID).Scan(&st, &exit, &out))
	require.Equal(t, "succeeded", st)
	require.Equal(t, "hi\n", out)
}

func TestResultFromStaleHolderIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.register(t, "thorax-a")
	other := b.register(t, "thorax-b")
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: a, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	cmdID := b.dispatch(t, "k1", "web-1", nil)
	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: a, PollTargets: []string{"web-1"}, MaxCommands: 1})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)

	// a hands it back; b claims it at a newer epoch; a's late result must be refused.
	rel, err := b.client.ReleaseCommands(b.ctx, &mantisv1.ReleaseCommandsRequest{InstanceId: a,
		Commands: []*mantisv1.CommandLease{{CommandId: cmdID.String(), LeaseEpoch: 1}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, rel.GetReleased())
	resp, err = b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: other, PollTargets: []string{"web-1"}, MaxCommands: 1})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1)
	require.Equal(t, int64(2), resp.GetCommands()[0].GetLeaseEpoch())

	// Reported for its own target (as Thorax forwards a poll agent's result), it is
	// stale; reported without one, a is a stranger to the command now.
	_, err = b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: a, CommandId: cmdID.String(), LeaseEpoch: 1,
		Target: "web-1", Result: &mantisv1.CommandResult{ExitCode: 0}})
	require.Equal(t, codes.FailedPrecondition, code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "stale lease epoch")
	_, err = b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: a, CommandId: cmdID.String(), LeaseEpoch: 1,
		Result: &mantisv1.CommandResult{ExitCode: 0}})
	require.Equal(t, codes.PermissionDenied, code(err), "%v", err)
	_, err = b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: other, CommandId: cmdID.String(), LeaseEpoch: 2,
		Result: &mantisv1.CommandResult{ExitCode: 3, Output: []byte("boom")}})
	require.NoError(t, err)
	var analyses int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM analyses WHERE command_id = $1`, cmdID).Scan(&analyses))
	require.Equal(t, 1, analyses, "a failed command queues an analysis")
}

func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	cases := map[string]error{}
	_, cases["register without name"] = b.client.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{})
	_, cases["heartbeat with bad id"] = b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: "not-a-uuid"})
	_, cases["heartbeat with bad target name"] = b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"bad name!"}})
	_, cases["fetch with zero max"] = b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst})
	_, cases["fetch with bad command id"] = b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, MaxCommands: 1, CommandIds: []string{"x"}})
	_, cases["store without result"] = b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: inst, CommandId: uuid.NewString(), LeaseEpoch: 1})
	_, cases["store with zero epoch"] = b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: inst, CommandId: uuid.NewString(), Result: &mantisv1.CommandResult{}})
	_, cases["redispatch without command"] = b.client.ScheduleRedispatch(b.ctx, &mantisv1.ScheduleRedispatchRequest{InstanceId: inst})
	for name, err := range cases {
		require.Equal(t, codes.InvalidArgument, code(err), "%s: %v", name, err)
	}
	_, err := b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: inst, CommandId: uuid.NewString(), LeaseEpoch: 1, Result: &mantisv1.CommandResult{}})
	require.Equal(t, codes.NotFound, code(err))
}

func TestDeadInstanceMustRegisterAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	_, err := b.pool.Exec(b.ctx, `UPDATE thorax_instances SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, inst)
	require.NoError(t, err)
	dead, err := schema.MarkDeadInstances(b.ctx, b.pool, schema.DeathRules{Timeout: time.Minute})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	_, err = b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst})
	require.Equal(t, codes.FailedPrecondition, code(err))
	_, err = b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: uuid.NewString()})
	require.Equal(t, codes.FailedPrecondition, code(err), "an unknown instance registers again too")
}

func TestDeadInstanceTargetsAreReassignedAndDeploymentsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.register(t, "thorax-a")
	// Pin the listen target to a, then start b.
	_, err := schema.RegisterTarget(b.ctx, b.pool, schema.NewTarget{Name: "db-1", Mode: "listen", Address: "127.0.0.1:1"}, time.Hour)
	require.NoError(t, err)
	other := b.register(t, "thorax-b")
	var assigned string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT assigned_instance_id FROM targets WHERE name = 'db-1'`).Scan(&assigned))
	require.Equal(t, a, assigned)

	deployment := uuid.New()
	_, err = b.pool.Exec(b.ctx, `INSERT INTO deployments (id, name, priority, status, spec) VALUES ($1, 'd', 'normal', 'running', '{}')`, deployment)
	require.NoError(t, err)
	cmdID := b.dispatch(t, "k1", "db-1", &deployment)
	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: a, MaxCommands: 5})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), 1, "a listen target's command goes to its assigned instance")
	require.Equal(t, "127.0.0.1:1", resp.GetCommands()[0].GetListenAddress())

	_, err = b.pool.Exec(b.ctx, `UPDATE thorax_instances SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, a)
	require.NoError(t, err)
	dead, err := schema.MarkDeadInstances(b.ctx, b.pool, schema.DeathRules{Timeout: time.Minute})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, other, dead[0].Reassigned["db-1"].String())
	require.Equal(t, []uuid.UUID{cmdID}, dead[0].LostCommands)
	require.Equal(t, []uuid.UUID{deployment}, dead[0].FailedDeployments)

	var depStatus, reqStatus string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM deployments WHERE id = $1`, deployment).Scan(&depStatus))
	require.Equal(t, "failed", depStatus)
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT p.status FROM pending_dispatch_requests p JOIN command_queue c ON c.dispatch_request_id = p.id WHERE c.id = $1`, cmdID).Scan(&reqStatus))
	require.Equal(t, "failed", reqStatus, "not retried")
	var events []string
	rows, err := b.pool.Query(b.ctx, `SELECT type FROM deployment_events ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var e string
		require.NoError(t, rows.Scan(&e))
		events = append(events, e)
	}
	require.Equal(t, []string{"target.running", "target.reassigned", "deployment.failed"}, events)

	// The late result of the dead holder is refused.
	_, err = b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: a, CommandId: cmdID.String(), LeaseEpoch: 1, Result: &mantisv1.CommandResult{}})
	require.Equal(t, codes.FailedPrecondition, code(err))
}

func TestRedispatchIsRefusedWhenTheBudgetIsSpent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	b.dispatch(t, "k1", "web-1", nil)
	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 1})
	require.NoError(t, err)
	c := resp.GetCommands()[0]
	ok, err := b.client.ScheduleRedispatch(b.ctx, &mantisv1.ScheduleRedispatchRequest{InstanceId: inst, CommandId: c.GetId(), LeaseEpoch: 1, Reason: "agent unreachable"})
	require.NoError(t, err)
	require.True(t, ok.GetScheduled())
	require.NotNil(t, ok.GetNextAttemptAt())

	// Spend the budget: the next hand-off failure is refused.
	_, err = b.pool.Exec(b.ctx, `UPDATE pending_dispatch_requests SET attempts = $1, next_attempt_at = now()`, domain.MaxDispatchRetries)
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, "r1", 1)
	require.NoError(t, err)
	_, err = schema.DeliverClaimed(b.ctx, b.pool, "r1", []domain.ClaimRef{{ID: claim.Claimed[0].ID, Epoch: claim.Claimed[0].Epoch}}, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	resp, err = b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 1})
	require.NoError(t, err)
	c = resp.GetCommands()[0]
	refused, err := b.client.ScheduleRedispatch(b.ctx, &mantisv1.ScheduleRedispatchRequest{InstanceId: inst, CommandId: c.GetId(), LeaseEpoch: c.GetLeaseEpoch(), Reason: "agent unreachable"})
	require.NoError(t, err)
	require.False(t, refused.GetScheduled())
	require.Contains(t, refused.GetRefusal(), "retry budget is spent (10 retries after the first delivery, 11 deliveries in all)")
	var st string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM pending_dispatch_requests`).Scan(&st))
	require.Equal(t, "failed", st)
}

func TestClientsWithoutTheRightCertificateAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noCert := mantisv1.NewMandibleServiceClient(b.dial(t, tlsconf.Files{CA: b.certs.CACert()}))
	_, err := noCert.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: "x"})
	require.Equal(t, codes.Unavailable, code(err), "%v", err)

	other, err := devcerts.Generate(t.TempDir(), []string{"localhost"})
	require.NoError(t, err)
	oc, ok := other.Pair("thorax")
	foreign := mantisv1.NewMandibleServiceClient(b.dial(t, tlsconf.Files{CA: b.certs.CACert(), Cert: oc, Key: ok}))
	_, err = foreign.RegisterInstance(b.ctx, &mantisv1.RegisterInstanceRequest{Name: "x"})
	require.Equal(t, codes.Unavailable, code(err), "%v", err)
}

// Concurrent results are written in shared statements; each is stored exactly once,
// with exactly one target event, and a retried store of the same result still answers OK.
func TestConcurrentResultsAreEachStoredOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	deployment := uuid.New()
	_, err = b.pool.Exec(b.ctx, `INSERT INTO deployments (id, name, priority, status, spec) VALUES ($1, 'd', 'normal', 'running', '{}')`, deployment)
	require.NoError(t, err)
	const n = 40
	for i := range n {
		r := schema.NewDispatchRequest{IdempotencyKey: fmt.Sprintf("k%d", i), Target: "web-1", Command: "true", Priority: "normal",
			DeploymentID: &deployment, StepPosition: new(int)}
		_, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, []schema.NewDispatchRequest{r})
		require.NoError(t, err)
	}
	claim, err := schema.ClaimPending(b.ctx, b.pool, "r1", n)
	require.NoError(t, err)
	refs := make([]domain.ClaimRef, len(claim.Claimed))
	for i, c := range claim.Claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	_, err = schema.DeliverClaimed(b.ctx, b.pool, "r1", refs, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: n})
	require.NoError(t, err)
	require.Len(t, resp.GetCommands(), n)

	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i, c := range resp.GetCommands() {
		for range 2 { // every result is sent twice at once, as a retry racing its original would
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.client.StoreCommandResult(b.ctx, &mantisv1.StoreCommandResultRequest{InstanceId: inst, CommandId: c.GetId(),
					LeaseEpoch: c.GetLeaseEpoch(), Result: &mantisv1.CommandResult{ExitCode: int32(i % 2), Output: []byte(c.GetId())}})
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var stored, events, analyses int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM command_queue WHERE status IN ('succeeded', 'failed') AND output = id::text`).Scan(&stored))
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM deployment_events WHERE type IN ('target.succeeded', 'target.failed')`).Scan(&events))
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM analyses`).Scan(&analyses))
	require.Equal(t, n, stored)
	require.Equal(t, n, events, "one event per result")
	require.Equal(t, n/2, analyses, "one analysis per failed result")
}

// A fetch answer stays under the message size Thorax receives, whatever is queued:
// the claim takes only commands that keep it within rpc.FetchAnswerBytes, and
// leaves the rest queued for the next fetch. The client here keeps gRPC's default
// limit of 4 MiB, as a Thorax of a release that sets none does; twelve commands of
// about 390 KiB each would be an answer of 4.7 MiB, refused by the client after the
// claim committed, every one of them then held by nobody who knows it.
func TestFetchAnswerIsBoundedBySize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.register(t, "thorax-a")
	_, err := b.client.Heartbeat(b.ctx, &mantisv1.HeartbeatRequest{InstanceId: inst, PollTargets: []string{"web-1"}})
	require.NoError(t, err)
	env := map[string]string{}
	for i := range 13 {
		env[fmt.Sprintf("BULK_%d", i)] = strings.Repeat("x", 30<<10)
	}
	var reqs []schema.NewDispatchRequest
	for i := range 12 {
		reqs = append(reqs, schema.NewDispatchRequest{IdempotencyKey: fmt.Sprintf("big-%d", i), Target: "web-1", Command: "true", Priority: "normal", Env: env})
	}
	deliverAll(t, b, reqs)

	seen := 0
	for fetch := 1; seen < len(reqs); fetch++ {
		require.LessOrEqual(t, fetch, 3, "twelve commands take two or three answers")
		resp, err := b.client.FetchPendingCommands(b.ctx, &mantisv1.FetchPendingCommandsRequest{InstanceId: inst, PollTargets: []string{"web-1"}, MaxCommands: 100})
		require.NoError(t, err, "fetch %d", fetch)
		require.NotEmpty(t, resp.GetCommands())
		require.LessOrEqual(t, proto.Size(resp), rpc.FetchAnswerBytes, "fetch %d", fetch)
		seen += len(resp.GetCommands())
	}
	var running int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM command_queue WHERE status = 'running'`).Scan(&running))
	require.Equal(t, len(reqs), running, "every claimed command reached the caller")
}

// deliverAll enqueues reqs, claims and delivers them, leaving queued commands.
func deliverAll(t *testing.T, b bundle, reqs []schema.NewDispatchRequest) {
	t.Helper()
	_, err := schema.EnqueueDispatchRequests(b.ctx, b.pool, reqs)
	require.NoError(t, err)
	claim, err := schema.ClaimPending(b.ctx, b.pool, "r1", 100)
	require.NoError(t, err)
	refs := make([]domain.ClaimRef, len(claim.Claimed))
	for i, c := range claim.Claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	_, err = schema.DeliverClaimed(b.ctx, b.pool, "r1", refs, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
}
