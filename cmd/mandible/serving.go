package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/sdnotify"
	"log/slog"
	"net"
	"net/http"
	"slices"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/mandible/analysis"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/mandible/sse"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/telemetry"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workers"
	"github.com/mantis-deploy/mantis/workflows"
)

// serve serves the HTTP API and the gRPC service for Thorax and runs the replica's
// background loops (dispatch, analysis, the Thorax monitor, notifications, SSE, token
// reloads, certificate expiry) until ctx ends or one of them fails, then stops the
// servers within shutdownGrace.
func (r *replica) serve(ctx context.Context) error {
	cfg, logger := r.cfg, r.logger
	idMetrics := identity.NewMetrics(r.registry)
	grpcServer, healthServer, err := r.newGRPC(idMetrics)
	if err != nil {
		return err
	}
	tokens, err := newTokenSource(cfg.HTTP, logger)
	if err != nil {
		return err
	}
	events := sse.NewBroker(sse.BrokerOptions{DB: r.pool, Logger: logger})
	httpServer := r.newHTTP(tokens, events)
	httpListener, err := listenHTTP(cfg.HTTP, logger)
	if err != nil {
		return err
	}
	grpcListener, err := net.Listen("tcp", cfg.GRPC.Listen)
	if err != nil {
		httpListener.Close()
		return fmt.Errorf("grpc.listen %s: %w", cfg.GRPC.Listen, err)
	}

	g, gctx := errgroup.WithContext(ctx)
	r.runLoops(g, gctx)
	g.Go(func() error { return tokens.Run(gctx) })
	g.Go(func() error {
		identity.WatchExpiry(gctx, logger, idMetrics, cfg.GRPC.CertPath, cfg.HTTP.CertPath, cfg.Queue.ClientCertPath)
		return nil
	})
	g.Go(func() error { return events.Run(gctx) })
	g.Go(func() error {
		logger.InfoContext(gctx, "serving HTTP", "addr", httpListener.Addr().String(), "tls", cfg.HTTP.TLS())
		if err := httpServer.Serve(httpListener); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		logger.InfoContext(gctx, "serving gRPC", "addr", grpcListener.Addr().String())
		// A shutdown that wins the race with Serve's start is a clean stop.
		if err := grpcServer.Serve(grpcListener); !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		_ = sdnotify.Stopping()
		return shutdown(ctx, logger, healthServer, grpcServer, httpServer)
	})
	// Both listeners are bound and served: under systemd (Type=notify) the unit is up.
	if err := sdnotify.Ready(); err != nil {
		logger.WarnContext(ctx, "telling systemd the service is ready failed", "err", err)
	}
	err = g.Wait()
	if ctx.Err() != nil && err == nil {
		logger.InfoContext(ctx, "stopped")
	}
	return err
}

// runLoops starts the replica's background loops in g: the analysis processor and
// its broker consumer, the dispatcher, the notification hub, the webhook worker and the Thorax monitor.
func (r *replica) runLoops(g *errgroup.Group, gctx context.Context) {
	cfg := r.cfg
	analyser := &analysis.Processor{DB: r.pool, Logger: r.logger, Refiner: analysis.NewRefiner(cfg.Analysis)}
	g.Go(func() error { return analyser.Run(gctx, analysis.DefaultInterval) })
	if cfg.Queue.Enabled {
		g.Go(func() error { return analysis.Consume(gctx, cfg.Queue, analyser) })
	}
	g.Go(func() error {
		return workers.RunDispatch(gctx, workers.DispatchOptions{
			Client:    r.temporal,
			Namespace: cfg.Temporal.Namespace,
			DB:        r.direct, // LISTEN needs a session
			ReplicaID: cfg.ReplicaID,
			Input: workflows.DispatcherInput{
				ReplicaID:         cfg.ReplicaID,
				PollInterval:      cfg.Dispatch.PollInterval.Duration,
				BatchSize:         cfg.Dispatch.BatchSize,
				ProcessingTimeout: cfg.Dispatch.ProcessingTimeout.Duration,
			},
			Logger: r.logger,
			Wakes:  r.acts.Wakes,
		})
	})
	g.Go(func() error { return r.hub.Run(gctx) })
	// Webhook deliveries: every replica fans out and sends; the database shares the work.
	g.Go(func() error { return (&webhook.Worker{DB: r.pool, Logger: r.logger}).Run(gctx) })
	g.Go(func() error {
		return workers.RunRetention(gctx, workers.RetentionOptions{DB: r.pool, Keep: cfg.Retention.Events.Duration,
			Interval: cfg.Retention.Interval.Duration, Logger: r.logger})
	})
	g.Go(func() error {
		return workers.NewMonitor(workers.MonitorOptions{
			DB: r.pool, Temporal: r.temporal, Namespace: cfg.Temporal.Namespace, ReplicaID: cfg.ReplicaID,
			HeartbeatTimeout:  cfg.Thorax.HeartbeatTimeout.Duration,
			ResultGrace:       cfg.Thorax.ResultGrace.Duration,
			ProcessingTimeout: cfg.Dispatch.ProcessingTimeout.Duration,
			Logger:            r.logger,
		}).Run(gctx)
	})
}

// shutdown stops serving: the gRPC health service says so, then the gRPC and HTTP
// servers stop gracefully within shutdownGrace (gRPC is stopped hard past it).
func shutdown(ctx context.Context, logger *slog.Logger, healthServer *health.Server, grpcServer *grpc.Server, httpServer *http.Server) error {
	logger.InfoContext(ctx, "shutting down")
	healthServer.Shutdown()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	stopped := make(chan struct{})
	go func() { grpcServer.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-shutdownCtx.Done():
		grpcServer.Stop()
	}
	return httpServer.Shutdown(shutdownCtx)
}

// newGRPC builds the gRPC server Thorax calls, with its health service and
// Mandible's service registered.
func (r *replica) newGRPC(idMetrics *identity.Metrics) (*grpc.Server, *health.Server, error) {
	var guard *identity.Guard // no identities on a plaintext development link
	if !r.cfg.GRPC.Insecure {
		guard = grpcapi.NewGuard(r.logger, idMetrics)
	}
	grpcServer, err := newGRPCServer(r.cfg.GRPC, r.logger, guard,
		append(rpc.NewMetrics(r.registry).ServerOptions(), telemetry.GRPCServerOption())...)
	if err != nil {
		return nil, nil, err
	}
	healthServer := health.NewServer()
	healthpb.RegisterHealthServer(grpcServer, healthServer)
	mantisv1.RegisterMandibleServiceServer(grpcServer, &grpcapi.MandibleService{
		DB:               r.pool,
		Logger:           r.logger,
		HeartbeatTimeout: r.cfg.Thorax.HeartbeatTimeout.Duration,
		ReplicaID:        r.cfg.ReplicaID,
		Guard:            guard,
		Secrets:          r.secrets,
		SecretResolver:   secretenv.Resolver{FilesDir: r.cfg.Secrets.FilesDir},
		// Live output: chunks of running commands, bounded per command.
		MaxOutputBytesPerCommand: r.cfg.Output.MaxBytesPerCommand,
		ScopeOf: func(cert string) (schema.InstanceScope, bool) {
			s, scoped := r.cfg.Thorax.ScopeOf(cert)
			return schema.InstanceScope{Names: s.Names, Labels: s.Labels}, scoped
		},
	})
	return grpcServer, healthServer, nil
}

// newGRPCServer builds the server Thorax connects to: mutual TLS, accepting only client
// certificates signed by the configured CA and, through guard, of the thorax role,
// unless grpc.insecure is set for development. extra adds options (the metrics
// interceptors, outermost, so that refused calls are counted too).
func newGRPCServer(cfg config.Listener, logger *slog.Logger, guard *identity.Guard, extra ...grpc.ServerOption) (*grpc.Server, error) {
	if cfg.Insecure {
		logger.Warn("gRPC is serving plaintext without client authentication (grpc.insecure = true): development only")
		if cfg.RemotePlaintext() {
			logger.Warn("plaintext link allowed off loopback, unsafe: any caller acts as a thorax",
				"key", "grpc.insecure_allow_remote", "address", cfg.Listen)
		}
		return grpc.NewServer(append(extra, rpc.ServerOptions()...)...), nil
	}
	tlsCfg, err := tlsconf.Server(tlsconf.Files{CA: cfg.CACertPath, Cert: cfg.CertPath, Key: cfg.KeyPath, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("grpc TLS: %w", err)
	}
	return grpc.NewServer(slices.Concat(extra, grpcapi.ServerOptions(guard), rpc.ServerOptions(),
		[]grpc.ServerOption{grpc.Creds(credentials.NewTLS(tlsCfg))})...), nil
}

// newHTTP builds the HTTP server of the API, SSE and the codec endpoint.
func (r *replica) newHTTP(tokens *tokenSource, events *sse.Broker) *http.Server {
	cfg := r.cfg
	sessions := consoleSessions(r.codec, tokens.keys, r.logger)
	// One limiter of failed credentials per address for the API, the codec's sign-in
	// and the console's: a guesser gains nothing by switching between them.
	limiter := httpapi.NewAuthLimiter(httpapi.AuthLimit{})
	api := httpapi.New(httpapi.Options{
		Logger:           r.logger,
		Registry:         r.registry,
		DB:               r.pool,
		Keyring:          tokens.keys,
		MaxBodyBytes:     cfg.HTTP.MaxBodyBytes,
		HeartbeatTimeout: cfg.Thorax.HeartbeatTimeout.Duration,
		Checks:           r.checks,
		DLQ:              r.dlq,
		Events:           sse.NewHandler(events, sse.HandlerOptions{Logger: r.logger, MaxReplay: cfg.SSE.MaxReplayEvents}),
		Streams:          httpapi.StreamLimits{Max: cfg.SSE.MaxStreams, PerCaller: cfg.SSE.MaxStreamsPerCaller},
		Temporal:         r.temporal,
		Namespace:        cfg.Temporal.Namespace,
		TemporalUIURL:    cfg.Temporal.UIURL,
		DeploymentQueue:  cfg.Temporal.DeploymentTaskQueue,
		Secrets:          r.secrets,
		Sessions:         sessions,
		AuthLimiter:      limiter,
	})
	ui := withConsole(withCodecEndpoint(api, cfg, r.codec, tokens.keys, sessions, limiter, r.logger), sessions, tokens.keys, limiter, r.logger)
	return httpServer(cfg.HTTP, telemetry.HTTPHandler(ui))
}

// httpServer is the HTTP server of h with the [http] section's timeouts. An event
// stream lifts the read and write timeouts for itself (sse.NewHandler).
func httpServer(cfg config.HTTP, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              cfg.Listen,
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout.Duration,
		ReadTimeout:       cfg.ReadTimeout.Duration,
		WriteTimeout:      cfg.WriteTimeout.Duration,
		IdleTimeout:       cfg.IdleTimeout.Duration,
	}
}
