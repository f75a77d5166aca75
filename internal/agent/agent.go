// Package agent is the Mantis agent: it runs commands on its host for Thorax.
//
// A Runner runs each command as `shell -c command` in a process group of its
// own, with a timeout, environment and working directory, keeps the tail of
// its output, and kills the whole group on timeout or cancel. It runs each
// dispatch request at most once on the host: a Journal on disk records every
// run's start and result by request id, so a redelivery joins the run or gets
// its result, across restarts too. The agent
// reaches Thorax one of two ways: a Poller long-polls Thorax's ThoraxService
// (poll mode), or a Server serves AgentService for Thorax to call (listen
// mode). Run wires either from the configuration.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/sdnotify"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
)

// grpcStopTimeout bounds the wait for listen-mode calls to answer once their
// commands are over, before their connections are cut.
const grpcStopTimeout = 5 * time.Second

// Run serves as cfg.Mode says until ctx is done, then stops gracefully: it
// takes no new commands, gives running ones exec.stop_timeout to finish, then
// kills their process groups. cfg must be valid. Run returns an error only
// when it cannot start (the journal included) or cannot serve. The agent's
// identity metrics (refusals, its certificate's expiry) are registered with
// the registry of m, the metrics listener's, and m counts the commands and
// calls and reports readiness; nil keeps them in a registry of their own.
func Run(ctx context.Context, cfg config.Agent, logger *slog.Logger, m *Metrics) error {
	logger = logger.With("target", cfg.Name, "mode", cfg.Mode)
	runs, err := journal.Open(cfg.JournalDir(), nil)
	if err != nil {
		return fmt.Errorf("opening journal.dir %s: %w", cfg.JournalDir(), err)
	}
	logger.InfoContext(ctx, "journal open", "journal_dir", runs.Dir(), "unreported_results", len(runs.Pending()))
	runner := NewRunner(cfg.Exec, runs, logger)
	if m == nil {
		m = NewMetrics(prometheus.NewRegistry())
	}
	runner.metrics = m
	idMetrics := identity.NewMetrics(m.reg)
	go identity.WatchExpiry(ctx, logger, idMetrics, ownCertificate(cfg))
	switch cfg.Mode {
	case config.ModePoll:
		if cfg.Thorax.Insecure {
			logger.WarnContext(ctx, "calling thorax in plaintext: thorax.insecure is set, for development only")
		}
		if cfg.Thorax.RemotePlaintext() {
			logger.WarnContext(ctx, "plaintext link allowed off loopback, unsafe: no identity checked on it",
				"key", "thorax.insecure_allow_remote", "address", cfg.Thorax.Address)
		}
		p, err := NewPoller(cfg, runner, logger)
		if err != nil {
			return err
		}
		logger.InfoContext(ctx, "polling thorax", "thorax_address", cfg.Thorax.Address, "max_concurrent", cfg.Exec.MaxConcurrent)
		m.setReadiness(connectedTo(p.conn))
		notifyReady(ctx, logger)
		return p.Run(ctx)
	case config.ModeListen:
		return serveListen(ctx, cfg, runner, idMetrics, logger)
	default:
		return fmt.Errorf("mode %q: must be poll or listen", cfg.Mode)
	}
}

// notifyReady tells systemd (Type=notify) that the agent is up: its journal is open
// and it polls Thorax or serves on its listen address.
func notifyReady(ctx context.Context, logger *slog.Logger) {
	if err := sdnotify.Ready(); err != nil {
		logger.WarnContext(ctx, "telling systemd the service is ready failed", "err", err)
	}
}

// ownCertificate is the path of the certificate the agent presents in its mode.
func ownCertificate(cfg config.Agent) string {
	if cfg.Mode == config.ModeListen {
		return cfg.Listen.CertPath
	}
	return cfg.Thorax.CertPath
}

// serveListen serves AgentService on listen.address until ctx is done.
func serveListen(ctx context.Context, cfg config.Agent, runner *Runner, metrics *identity.Metrics, logger *slog.Logger) error {
	creds, err := ListenCredentials(cfg.Listen, identity.HandshakeRefusals(identity.LinkListenAgent, logger, metrics))
	if err != nil {
		return err
	}
	if err := CheckListenIdentity(cfg); err != nil {
		return err
	}
	if cfg.Listen.Insecure {
		logger.WarnContext(ctx, "serving thorax in plaintext: listen.insecure is set, for development only")
	}
	if cfg.Listen.RemotePlaintext() {
		logger.WarnContext(ctx, "plaintext link allowed off loopback, unsafe: anyone who reaches it runs commands on this host",
			"key", "listen.insecure_allow_remote", "address", cfg.Listen.Address)
	}
	lis, err := net.Listen("tcp", cfg.Listen.Address)
	if err != nil {
		return fmt.Errorf("listen.address %s: %w", cfg.Listen.Address, err)
	}
	srv := NewServer(cfg.Name, runner, logger)
	srv.Metrics = metrics
	gs := NewGRPCServer(srv, creds)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	logger.InfoContext(ctx, "serving agent service",
		"listen_address", lis.Addr().String(),
		"allowed_client_names", cfg.Listen.AllowedClientNames,
		"max_concurrent", cfg.Exec.MaxConcurrent)
	notifyReady(ctx, logger)
	runner.metrics.setReadiness(func() error { return nil })
	defer runner.metrics.setReadiness(func() error { return errNotServing })

	select {
	case err := <-served:
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Exec.StopTimeout.Duration)
		defer cancel()
		runner.Shutdown(stopCtx)
		return fmt.Errorf("serving agent service: %w", err)
	case <-ctx.Done():
	}
	logger.InfoContext(ctx, "agent stopping: no new commands")
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop() // closes the listener now, returns once calls are answered
		close(stopped)
	}()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Exec.StopTimeout.Duration)
	defer cancel()
	if killed := runner.Shutdown(stopCtx); killed > 0 {
		logger.WarnContext(ctx, "killed commands still running at stop", "killed", killed)
	}
	stopGRPC(gs, stopped)
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving agent service: %w", err)
	}
	return nil
}

// stopGRPC waits a little for GracefulStop, then cuts what is left.
func stopGRPC(gs *grpc.Server, stopped <-chan struct{}) {
	t := time.NewTimer(grpcStopTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		gs.Stop()
		<-stopped
	}
}
