package e2e_test

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/thorax"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// resultRig is Mandible's gRPC service on a real database, behind an
// interceptor that can make StoreCommandResult answer UNAVAILABLE, and the
// Thorax instances a test starts against it.
type resultRig struct {
	ctx  context.Context
	pool *pgxpool.Pool
	addr string
	// failStores is how many StoreCommandResult calls still fail; stores
	// counts every call.
	failStores atomic.Int32
	stores     atomic.Int32
}

func setupResultRig(t *testing.T) *resultRig {
	t.Helper()
	r := &resultRig{ctx: context.Background(), pool: testenv.MigratedPool(t)}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == mantisv1.MandibleService_StoreCommandResult_FullMethodName {
			n := r.stores.Add(1)
			if r.failStores.Add(-1) >= 0 {
				// What Mandible answers while it restarts, and while its
				// database cannot be reached.
				if n%2 == 1 {
					return nil, status.Error(codes.Unavailable, "mandible is restarting")
				}
				return nil, status.Error(codes.Internal, "StoreCommandResult failed; see the Mandible log")
			}
		}
		return h(ctx, req)
	}))
	mantisv1.RegisterMandibleServiceServer(srv, &grpcapi.MandibleService{DB: r.pool, Logger: slog.New(slog.DiscardHandler), HeartbeatTimeout: time.Hour})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	r.addr = lis.Addr().String()
	_, err = r.pool.Exec(r.ctx, `INSERT INTO targets (name, mode) VALUES ('web-1', 'poll')`)
	require.NoError(t, err)
	return r
}

// startThorax runs a Thorax against the rig until the test ends.
func (r *resultRig) startThorax(t *testing.T, name string) *thorax.Thorax {
	t.Helper()
	th, _ := r.startStoppableThorax(t, name)
	return th
}

// startStoppableThorax runs a Thorax against the rig until the test ends or
// stop is called; stop starts its drain and returns at once.
func (r *resultRig) startStoppableThorax(t *testing.T, name string) (th *thorax.Thorax, stop func()) {
	t.Helper()
	cfg := config.DefaultThorax()
	cfg.Name = name
	cfg.Mandible = config.Endpoint{Address: r.addr, TLS: config.TLS{Insecure: true}}
	cfg.Agents.Listen = "127.0.0.1:0"
	cfg.Agents.Insecure = true
	cfg.Queue.Enabled = false
	cfg.Polling.Interval.Duration = 100 * time.Millisecond
	cfg.Heartbeat.Interval.Duration = time.Second
	cfg.Drain.Timeout.Duration = 2 * time.Second
	require.NoError(t, cfg.Validate())
	th, err := thorax.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- th.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(brokerWait):
			t.Error("thorax did not stop")
		}
	})
	select {
	case <-th.Ready():
	case err := <-done:
		t.Fatalf("thorax stopped before it was ready: %v", err)
	case <-time.After(brokerWait):
		t.Fatal("thorax did not become ready")
	}
	return th, cancel
}

// agentOf is a poll-mode agent's client of th.
func agentOf(t *testing.T, th *thorax.Thorax) mantisv1.ThoraxServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(th.AgentsAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return mantisv1.NewThoraxServiceClient(conn)
}

// dispatch writes a queued command for web-1, served by instance.
func (r *resultRig) dispatch(t *testing.T, instance string) uuid.UUID {
	t.Helper()
	_, err := r.pool.Exec(r.ctx, `UPDATE targets SET assigned_instance_id = $1 WHERE name = 'web-1'`, instance)
	require.NoError(t, err)
	_, err = schema.EnqueueDispatchRequests(r.ctx, r.pool, []schema.NewDispatchRequest{{IdempotencyKey: uuid.NewString(), Target: "web-1", Command: "true", Priority: "normal"}})
	require.NoError(t, err)
	claim, err := schema.ClaimPending(r.ctx, r.pool, "r1", 10)
	require.NoError(t, err)
	require.Len(t, claim.Claimed, 1)
	out, err := schema.DeliverClaimed(r.ctx, r.pool, "r1", refs(claim.Claimed), schema.DeliverOptions{HeartbeatTimeout: time.Hour})
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeDispatched, out[0].Outcome, out[0].Error)
	return *out[0].CommandID
}

func refs(claimed []domain.ClaimedRequest) []domain.ClaimRef {
	out := make([]domain.ClaimRef, len(claimed))
	for i, c := range claimed {
		out[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	return out
}

// take polls th as web-1's agent until it hands out the command.
func take(t *testing.T, agent mantisv1.ThoraxServiceClient, id uuid.UUID) *mantisv1.Command {
	t.Helper()
	var got *mantisv1.Command
	require.Eventually(t, func() bool {
		resp, err := agent.PollCommands(context.Background(), &mantisv1.PollCommandsRequest{Target: "web-1", MaxCommands: 1, Wait: durationpb.New(time.Second)})
		if err == nil && len(resp.GetCommands()) == 1 {
			got = resp.GetCommands()[0]
		}
		return got != nil
	}, brokerWait, 10*time.Millisecond, "the agent never received its command")
	require.Equal(t, id.String(), got.GetId())
	return got
}

func report(cmd *mantisv1.Command, exit int32) *mantisv1.ReportResultRequest {
	return &mantisv1.ReportResultRequest{
		Target: "web-1", CommandId: cmd.GetId(), LeaseEpoch: cmd.GetLeaseEpoch(), DispatchRequestId: cmd.GetDispatchRequestId(),
		Result: &mantisv1.CommandResult{ExitCode: exit, Output: []byte("done\n"), StartedAt: timestamppb.Now(), FinishedAt: timestamppb.Now()},
	}
}

// stored reads what Mandible recorded of the command: its status and the
// instances that claimed it and delivered its result.
func (r *resultRig) stored(t *testing.T, id uuid.UUID) (status string, holder, deliveredBy *uuid.UUID) {
	t.Helper()
	require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT status, holder_instance_id, result_instance_id FROM command_queue WHERE id = $1`, id).
		Scan(&status, &holder, &deliveredBy))
	return status, holder, deliveredBy
}

// A result Mandible could not take (UNAVAILABLE while it restarts, INTERNAL
// while its database is unreachable) is retried by Thorax until it is
// stored, and the agent hears OK only then.
func TestResultRefusedOnceIsRetriedAndStored(t *testing.T) {
	t.Parallel()
	r := setupResultRig(t)
	a := r.startThorax(t, "thorax-a")
	id := r.dispatch(t, a.InstanceID())
	cmd := take(t, agentOf(t, a), id)

	r.failStores.Store(4)
	_, err := agentOf(t, a).ReportResult(r.ctx, report(cmd, 0))
	require.NoError(t, err)
	require.EqualValues(t, 5, r.stores.Load(), "four transient failures, then the store")
	st, _, deliveredBy := r.stored(t, id)
	require.Equal(t, "succeeded", st)
	require.Equal(t, a.InstanceID(), deliveredBy.String())
}

// A result reported to an instance that does not hold the command is
// forwarded with the agent's lease epoch and stored while that epoch is
// current; once the command was claimed again, the same report is refused
// and says that its epoch is stale.
func TestResultThroughAnotherInstanceIsStoredAtTheCurrentEpoch(t *testing.T) {
	t.Parallel()
	r := setupResultRig(t)
	a := r.startThorax(t, "thorax-a")
	b := r.startThorax(t, "thorax-b")
	id := r.dispatch(t, a.InstanceID())
	cmd := take(t, agentOf(t, a), id)

	_, err := agentOf(t, b).ReportResult(r.ctx, report(cmd, 3))
	require.NoError(t, err, "thorax-b forwards the result of a command thorax-a handed out")
	st, holder, deliveredBy := r.stored(t, id)
	require.Equal(t, "failed", st)
	require.Equal(t, a.InstanceID(), holder.String())
	require.Equal(t, b.InstanceID(), deliveredBy.String())

	_, err = agentOf(t, a).ReportResult(r.ctx, report(cmd, 3))
	require.NoError(t, err, "a replay through the instance that handed it out is accepted")

	// A second command, claimed again at a newer epoch after the agent took it.
	id2 := r.dispatch(t, a.InstanceID())
	cmd2 := take(t, agentOf(t, a), id2)
	_, err = r.pool.Exec(r.ctx, `UPDATE command_queue SET lease_epoch = lease_epoch + 1 WHERE id = $1`, id2)
	require.NoError(t, err)
	_, err = agentOf(t, b).ReportResult(r.ctx, report(cmd2, 0))
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "stale lease epoch")
	require.NotContains(t, status.Convert(err).Message(), "current", "a refusal names no epoch")
	st, _, _ = r.stored(t, id2)
	require.Equal(t, "running", st)
}

// A result that cannot be stored is retried through the drain, and when the
// drain gives up the agent hears UNAVAILABLE, so that it reports again,
// through another instance or this one restarted; the result is stored then.
func TestResultStillUnstoredAtTheEndOfTheDrainIsUnavailableToTheAgent(t *testing.T) {
	t.Parallel()
	r := setupResultRig(t)
	a, stopA := r.startStoppableThorax(t, "thorax-a")
	b := r.startThorax(t, "thorax-b")
	id := r.dispatch(t, a.InstanceID())
	cmd := take(t, agentOf(t, a), id)

	r.failStores.Store(1 << 20)
	reported := make(chan error, 1)
	go func() {
		_, err := agentOf(t, a).ReportResult(r.ctx, report(cmd, 0))
		reported <- err
	}()
	require.Eventually(t, func() bool { return r.stores.Load() >= 2 }, brokerWait, 10*time.Millisecond, "thorax-a never retried the store")
	stopA()
	select {
	case err := <-reported:
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	case <-time.After(brokerWait):
		t.Fatal("the agent never heard back")
	}
	st, _, _ := r.stored(t, id)
	require.Equal(t, "running", st)

	r.failStores.Store(0)
	_, err := agentOf(t, b).ReportResult(r.ctx, report(cmd, 0))
	require.NoError(t, err, "the agent's retry through another instance is stored")
	st, _, deliveredBy := r.stored(t, id)
	require.Equal(t, "succeeded", st)
	require.Equal(t, b.InstanceID(), deliveredBy.String())
}
