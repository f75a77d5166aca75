package e2e_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/thorax"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// drainGate is a MandibleService in front of the rig's recording proxy that
// holds a nudge's claim, and every draining heartbeat, until the test lets
// them through: so that a test can start a drain while a nudge is half-way
// through its claim and have Mandible answer that claim before it learns of
// the drain.
type drainGate struct {
	*recordingMandible
	addr string
	// claimArrived receives the command ids of each nudge's claim as it
	// arrives; releaseClaims lets the claims through.
	claimArrived  chan []string
	releaseClaims chan struct{}
	// drainingBeat is closed at the first heartbeat that says draining;
	// releaseBeats lets the draining heartbeats through.
	drainingBeat chan struct{}
	releaseBeats chan struct{}
	beatOnce     sync.Once
	// stopped is closed when the test ends.
	stopped chan struct{}
}

func startDrainGate(t *testing.T, next string) *drainGate {
	t.Helper()
	conn, err := grpc.NewClient(next, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	g := &drainGate{
		recordingMandible: &recordingMandible{next: mantisv1.NewMandibleServiceClient(conn)},
		claimArrived:      make(chan []string, 10),
		releaseClaims:     make(chan struct{}),
		drainingBeat:      make(chan struct{}),
		releaseBeats:      make(chan struct{}),
		stopped:           make(chan struct{}),
	}
	server := grpc.NewServer()
	mantisv1.RegisterMandibleServiceServer(server, g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g.addr = ln.Addr().String()
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(server.Stop)
	t.Cleanup(func() { close(g.stopped) })
	return g
}

// FetchPendingCommands holds a claim that names commands (a nudge's) until
// the test releases the claims.
func (g *drainGate) FetchPendingCommands(ctx context.Context, req *mantisv1.FetchPendingCommandsRequest) (*mantisv1.FetchPendingCommandsResponse, error) {
	if len(req.GetCommandIds()) > 0 {
		g.claimArrived <- req.GetCommandIds()
		select {
		case <-g.releaseClaims:
		case <-ctx.Done():
		}
	}
	return g.recordingMandible.FetchPendingCommands(ctx, req)
}

// Heartbeat holds every heartbeat that says draining until the test releases
// them.
func (g *drainGate) Heartbeat(ctx context.Context, req *mantisv1.HeartbeatRequest) (*mantisv1.HeartbeatResponse, error) {
	if req.GetDraining() {
		g.beatOnce.Do(func() { close(g.drainingBeat) })
		select {
		case <-g.releaseBeats:
		case <-g.stopped:
		}
		// The instance may have stopped meanwhile (its drain had nothing left to
		// wait for): Mandible still hears that it drained, as it would have.
		ctx = context.WithoutCancel(ctx)
	}
	return g.recordingMandible.Heartbeat(ctx, req)
}

// startDrainableThorax is the rig's startThorax, and the function that starts
// the instance's drain (as SIGTERM does) and returns at once.
func (r *brokerRig) startDrainableThorax(t *testing.T, cfg config.Thorax) (*inProcessThorax, func()) {
	t.Helper()
	require.NoError(t, cfg.Validate())
	logs := newRecordingLogs(t)
	th, err := thorax.New(cfg, slog.New(logs))
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
	require.Eventually(t, func() bool { return len(r.proxy.pollFetches(th.InstanceID())) > 0 }, brokerWait, 10*time.Millisecond,
		"thorax never made its first polling fetch")
	return &inProcessThorax{Thorax: th, logs: logs}, cancel
}

// A nudge whose claim is answered after its Thorax started draining is not a
// failure: the instance hands the command it was given straight back (no
// attempt spent) and acknowledges the nudge, which has max_retries 0 so that
// any failed attempt would dead-letter it at once. Nothing goes to mantis.dlq,
// and the command runs once, on the instance its listen target moved to.
func TestNudgeAnsweredWhileThoraxDrainsIsAcknowledgedAndTheCommandRunsElsewhere(t *testing.T) {
	r := setupBrokerRig(t, false)
	r.grant(t)
	gate := startDrainGate(t, r.proxy.addr)
	cfg := r.thoraxConfig()
	cfg.Mandible.Address = gate.addr
	draining, drain := r.startDrainableThorax(t, cfg)
	drainingID := draining.InstanceID()
	otherCfg := r.thoraxConfig()
	otherCfg.Name = "thorax-e2e-other"
	otherCfg.Queue.Enabled = false
	otherCfg.Polling.Interval.Duration = 200 * time.Millisecond
	otherCfg.Polling.FallbackInterval.Duration = 200 * time.Millisecond
	other := r.startThorax(t, otherCfg)
	r.addTarget(t, "listen-1", uuid.MustParse(drainingID))
	cmd := r.enqueue(t, "listen-1", "true", "normal")[0]

	r.nudge(t, cmd, "normal", 0)
	select {
	case ids := <-gate.claimArrived:
		require.Equal(t, []string{cmd.String()}, ids)
	case <-time.After(brokerWait):
		t.Fatal("the nudge was never claimed")
	}
	require.Equal(t, "queued", r.command(t, cmd).status, "only the nudge claims the command")

	drain()
	select {
	case <-gate.drainingBeat:
	case <-time.After(brokerWait):
		t.Fatal("the instance never heartbeat draining")
	}
	// Mandible still has the instance live and its target assigned: it hands
	// the command over to an instance that is draining.
	close(gate.releaseClaims)
	require.Eventually(t, func() bool {
		return len(draining.logs.matching("handed commands back to mandible", "why", "claimed while draining", "released", "1")) == 1
	}, brokerWait, 20*time.Millisecond, "the draining instance did not hand the command back")
	close(gate.releaseBeats)

	r.waitSucceeded(t, cmd)
	final := r.command(t, cmd)
	require.Equal(t, other.InstanceID(), final.holder.String(), "the command ran on the instance its target moved to")
	require.EqualValues(t, 2, final.leaseEpoch, "claimed by the draining instance, handed back, claimed by the other")
	require.Equal(t, 1, r.agent.runCounts()[cmd.String()], "the command ran once")
	var attempts int
	require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT p.attempts FROM pending_dispatch_requests p
		JOIN command_queue c ON c.dispatch_request_id = p.id WHERE c.id = $1`, cmd).Scan(&attempts))
	require.Zero(t, attempts, "a command handed back by a draining instance costs no attempt")

	require.Zero(t, r.depth(t, broker.DeadLetterQ), "the nudge did not go to mantis.dlq")
	require.Zero(t, r.depth(t, broker.NormalQueue), "the nudge was acknowledged, not left for another consumer")
	require.Empty(t, draining.logs.matching("nudge processing failed for good: dead-lettered", "command_id", cmd.String()))
	require.Empty(t, draining.logs.matching("dead-lettering nudge that cannot be processed", "command_id", cmd.String()))
	require.Empty(t, draining.logs.matching("mandible scheduled another dispatch of the nudged command", "command_id", cmd.String()),
		"no give-up: the nudge did not fail")
	require.Empty(t, draining.logs.matching("mandible refused another dispatch of the nudged command", "command_id", cmd.String()))
}
