package thorax

// Run: serving agents, the loops of a registered instance, and the drain that ends
// them.

import (
	"context"
	"errors"
	"fmt"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/sdnotify"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/internal/identity"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// Run serves until ctx ends, then drains: it stops claiming, heartbeats
// draining, hands back the commands no agent took, waits (up to drain.timeout)
// for running listen-mode calls and for the results poll-mode agents owe, and
// stops. It returns nil after a drain; an error only when it cannot serve.
func (t *Thorax) Run(ctx context.Context) error {
	t.warnInsecure(ctx)
	ln, err := net.Listen("tcp", t.cfg.Agents.Listen)
	if err != nil {
		return fmt.Errorf("agents.listen %s: %w", t.cfg.Agents.Listen, err)
	}
	conn, err := grpc.NewClient(t.cfg.Mandible.Address, append(t.metrics.rpc.DialOptions(),
		grpc.WithTransportCredentials(t.mandibleCreds), reconnectQuickly, telemetry.GRPCDialOption(), rpc.DialOption())...)
	if err != nil {
		ln.Close()
		return fmt.Errorf("mandible.address %s: %w", t.cfg.Mandible.Address, err)
	}
	defer conn.Close()
	defer t.agents.closeAll()

	// work outlives ctx: hand-offs and result stores go on through the drain
	// and end only when the drain gives up on them.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()

	t.mu.Lock()
	t.mandible = mantisv1.NewMandibleServiceClient(conn)
	t.agentsAddr = ln.Addr().String()
	t.work = work
	t.mu.Unlock()

	go identity.WatchExpiry(work, t.logger, t.idMetrics, t.cfg.Agents.TLS.CertPath, t.cfg.Mandible.TLS.CertPath)
	agents := t.serveAgents(ctx, ln)

	if err := t.register(ctx); err != nil {
		agents.stop()
		if ctx.Err() != nil {
			t.logger.InfoContext(ctx, "stopped before registering")
			return nil
		}
		return err
	}
	close(t.ready)
	// Under systemd (Type=notify) the unit is started once Mandible has the instance.
	if err := sdnotify.Ready(); err != nil {
		t.logger.WarnContext(ctx, "telling systemd the service is ready failed", "err", err)
	}
	return t.serveRegistered(ctx, work, stopWork, agents)
}

// warnInsecure warns of each plaintext link the configuration allows.
func (t *Thorax) warnInsecure(ctx context.Context) {
	if t.cfg.Mandible.Insecure {
		t.logger.WarnContext(ctx, "calling mandible in plaintext without certificates (mandible.insecure = true): development only")
	}
	if t.cfg.Agents.Insecure {
		t.logger.WarnContext(ctx, "agent link is plaintext without certificates (agents.insecure = true): development only")
	}
	if t.cfg.Mandible.RemotePlaintext() {
		t.logger.WarnContext(ctx, "plaintext link allowed off loopback, unsafe: no identity checked on it",
			"key", "mandible.insecure_allow_remote", "address", t.cfg.Mandible.Address)
	}
	if t.cfg.Agents.RemotePlaintext() {
		t.logger.WarnContext(ctx, "plaintext link allowed off loopback, unsafe: no identity checked on it",
			"key", "agents.insecure_allow_remote", "address", t.cfg.Agents.Listen)
	}
}

// serveRegistered runs the loops of a registered instance (heartbeats, fetching,
// sweeping, the broker consumers and the listen-mode workers) until ctx ends or the
// agents server fails, then drains. It returns the agents server's failure, if any.
func (t *Thorax) serveRegistered(ctx, work context.Context, stopWork context.CancelFunc, agents *agentsServer) error {
	heartbeats, stopHeartbeats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHeartbeats()

	// serving ends with ctx, or when the agents server fails.
	serving, stopServing := context.WithCancel(ctx)
	defer stopServing()
	var loops, workers, beating sync.WaitGroup
	beating.Go(func() { t.heartbeatLoop(heartbeats, serving) })
	loops.Go(func() { t.fetchLoop(serving) })
	loops.Go(func() { t.sweepLoop(serving, work) })
	if t.cfg.Queue.Enabled {
		loops.Go(func() { t.consume(serving) })
	}
	for range t.cfg.Agents.MaxConcurrentCalls {
		workers.Go(func() { t.listenWorker(work) })
	}
	workers.Go(func() { t.runOutput(work) })

	var failed error
	select {
	case <-ctx.Done():
	case err := <-agents.serveErr:
		failed = fmt.Errorf("serving agents: %w", err)
		agents.serveErr <- nil // for the read after stop
		t.logger.ErrorContext(ctx, "agents server failed: draining", "err", err)
	}
	stopServing()

	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.Drain.Timeout.Duration)
	defer cancelDrain()
	t.drain(drainCtx, agents, &loops)
	stopWork()
	workers.Wait()
	agents.stop()
	// Serve reports ErrServerStopped when the stop won the race with its
	// start (a Thorax stopped right after it registered): that is a clean stop.
	if err := <-agents.serveErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) && failed == nil {
		failed = fmt.Errorf("serving agents: %w", err)
	}
	stopHeartbeats()
	beating.Wait()
	t.background.Wait()
	if failed != nil {
		return failed
	}
	t.logger.InfoContext(drainCtx, "stopped")
	return nil
}

// drain stops claiming, heartbeats draining, hands back the commands no agent took
// once the claiming loops have ended, and waits, within drainCtx, for the commands
// still out to agents.
func (t *Thorax) drain(drainCtx context.Context, agents *agentsServer, loops *sync.WaitGroup) {
	start := time.Now()
	unhanded := t.book.startDrain()
	_ = sdnotify.Stopping()
	agents.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	t.logger.InfoContext(drainCtx, "draining", "unhanded_commands", len(unhanded), "timeout", t.cfg.Drain.Timeout.Duration)
	t.beatNow()
	loops.Wait()
	t.release(drainCtx, unhanded, "drain")
	var abandoned []string
	if err := t.book.waitEmpty(drainCtx); err != nil {
		abandoned = t.book.remaining()
		t.logger.WarnContext(drainCtx, "drain timed out: abandoning commands still out to agents",
			"commands", len(abandoned), "command_ids", abandoned)
	}
	t.awaitDrainHeard(drainCtx)
	t.metrics.drained(time.Since(start), len(abandoned))
}

// awaitDrainHeard waits, within drainCtx and at most two calls' time, until Mandible
// has heard that the instance drains: a drain with nothing to wait for would
// otherwise end before its heartbeat, and its listen targets would move only once
// the instance was found silent.
func (t *Thorax) awaitDrainHeard(drainCtx context.Context) {
	if _, id := t.registration(); id == "" {
		return // never registered, or no longer: Mandible holds nothing of it
	}
	ctx, cancel := context.WithTimeout(drainCtx, 2*callTimeout)
	defer cancel()
	select {
	case <-t.drainHeard:
	case <-ctx.Done():
		t.logger.WarnContext(drainCtx, "mandible did not hear of the drain: its listen targets move once the instance is found silent")
	}
}

// agentsServer is the gRPC server agents call, with its health service.
type agentsServer struct {
	server *grpc.Server
	health *health.Server
	// serveErr receives Serve's return.
	serveErr chan error
}

// serveAgents starts serving the agents' gRPC service on ln.
func (t *Thorax) serveAgents(ctx context.Context, ln net.Listener) *agentsServer {
	a := &agentsServer{server: grpc.NewServer(slices.Concat([]grpc.ServerOption{telemetry.GRPCServerOption()}, rpc.ServerOptions(), t.serverOpts)...), health: health.NewServer(), serveErr: make(chan error, 1)}
	mantisv1.RegisterThoraxServiceServer(a.server, &agentService{t: t})
	healthpb.RegisterHealthServer(a.server, a.health)
	go func() {
		t.logger.InfoContext(ctx, "serving agents", "addr", ln.Addr().String())
		a.serveErr <- a.server.Serve(ln)
	}()
	return a
}

// stop shuts the health service down and stops the server gracefully, within
// stopGrace.
func (a *agentsServer) stop() {
	a.health.Shutdown()
	stopped := make(chan struct{})
	go func() { a.server.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(stopGrace):
		a.server.Stop()
	}
}
