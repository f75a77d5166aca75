package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/analysis"
	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/grpcapi"
	"github.com/mantis-deploy/mantis/internal/httpapi"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/pgnotify"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/sse"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workers"
	"github.com/mantis-deploy/mantis/workflows"
)

// shutdownGrace bounds how long serving stops take after SIGTERM.
const shutdownGrace = 20 * time.Second

func newLogger(cfg config.Log) *slog.Logger { return slog.New(cfg.Handler(os.Stderr)) }

// openDatabase connects to PostgreSQL as appName (unless database.url sets its own
// application_name), waiting a bounded time for it to accept connections (replicas
// often start alongside their database).
func openDatabase(ctx context.Context, cfg config.Database, appName string, logger *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("database.url: %w", err)
	}
	pcfg.MaxConns = int32(cfg.MaxConns)
	if _, set := pcfg.ConnConfig.RuntimeParams["application_name"]; !set {
		pcfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening database pool: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := pool.Ping(ctx)
		if err == nil {
			return pool, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("connecting to database at %s: %w", pcfg.ConnConfig.Host, err)
		}
		logger.WarnContext(ctx, "database not reachable yet, retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func migrate(ctx context.Context, cfg config.Mandible, out io.Writer) error {
	logger := newLogger(cfg.Log)
	pool, err := openDatabase(ctx, cfg.Database, cfg.ApplicationName(), logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := schema.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(out, "schema is up to date")
		return nil
	}
	fmt.Fprintf(out, "applied migrations %v\n", applied)
	return nil
}

// serveOptions are the flags of serve that are not configuration.
type serveOptions struct {
	pauseAfterClaim bool
}

func serve(ctx context.Context, cfg config.Mandible, opts serveOptions) error {
	logger := newLogger(cfg.Log)
	logger.InfoContext(ctx, "starting mandible", "replica_id", cfg.ReplicaID, "config", cfg)

	pool, err := openDatabase(ctx, cfg.Database, cfg.ApplicationName(), logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := schema.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		logger.InfoContext(ctx, "applied schema migrations", "versions", applied)
	}

	temporalOpts, payloadCodec, err := temporalclient.Options(cfg.Temporal, logger)
	if err != nil {
		return err
	}
	cfg.Temporal.Address, cfg.Temporal.Namespace = temporalOpts.HostPort, temporalOpts.Namespace
	if payloadCodec == nil {
		logger.WarnContext(ctx, "Temporal payloads are not encrypted: set temporal.codec_key_file or temporal.codec_keys_dir")
	}
	temporal, err := client.DialContext(ctx, temporalOpts)
	if err != nil {
		return fmt.Errorf("connecting to Temporal at %s: %w", cfg.Temporal.Address, err)
	}
	defer temporal.Close()

	if err := workers.EnsureSearchAttributes(ctx, temporal, cfg.Temporal.Namespace, workflows.SearchAttributes()); err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	acts := &activities.Activities{
		DB:      pool,
		Logger:  logger,
		Metrics: activities.NewMetrics(registry, pool),
		Dispatch: activities.DispatchConfig{
			ProcessingTimeout: cfg.Dispatch.ProcessingTimeout.Duration,
			DeliveryTimeout:   cfg.Dispatch.DeliveryTimeout.Duration,
			HeartbeatTimeout:  cfg.Thorax.HeartbeatTimeout.Duration,
		},
		Wakes: &activities.WakeCoalescer{},
		Hooks: testHooks(opts.pauseAfterClaim, logger),
	}
	var secrets secretenv.Keyring // stays nil (not a nil *codec.Codec) without a keyring
	if payloadCodec != nil {
		secrets = payloadCodec
	}
	acts.Secrets = secrets
	checks := map[string]httpapi.Check{
		"database": func(ctx context.Context) error { return pool.Ping(ctx) },
		"temporal": func(ctx context.Context) error {
			_, err := temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	}
	var dlq httpapi.DLQ // stays nil without a broker
	if cfg.Queue.Enabled {
		b := broker.NewClient(cfg.Queue, "mandible "+cfg.ReplicaID, logger)
		defer b.Close()
		acts.Broker = b
		checks["broker"] = b.Ping
		dlq = broker.NewDLQ(cfg.Queue, "mandible "+cfg.ReplicaID+" dlq")
	} else {
		logger.WarnContext(ctx, "running without a broker ([queue] enabled = false): Thorax finds commands by polling")
	}

	hub := pgnotify.NewHub(pool, logger, activities.ResultsChannel)
	acts.Notifications = hub

	w, err := workers.StartReplicaWorker(temporal, cfg.ReplicaID, acts)
	if err != nil {
		return err
	}
	defer w.Stop()
	dw, err := workers.StartDeploymentWorker(temporal, cfg.Temporal.DeploymentTaskQueue, acts)
	if err != nil {
		return err
	}
	defer dw.Stop()
	if cfg.Queue.Enabled {
		topo, err := workers.DeclareTopology(ctx, temporal, cfg.ReplicaID)
		if err != nil {
			return err
		}
		logger.InfoContext(ctx, "declared RabbitMQ topology", "vhost", cfg.Queue.VHost,
			"exchanges", len(topo.Exchanges), "queues", len(topo.Queues), "bindings", topo.Bindings)
	}

	idMetrics := identity.NewMetrics(registry)
	var guard *identity.Guard // no identities on a plaintext development link
	if !cfg.GRPC.Insecure {
		guard = grpcapi.NewGuard(logger, idMetrics)
	}
	grpcServer, err := newGRPCServer(cfg.GRPC, logger, guard)
	if err != nil {
		return err
	}
	healthServer := health.NewServer()
	healthpb.RegisterHealthServer(grpcServer, healthServer)
	mantisv1.RegisterMandibleServiceServer(grpcServer, &grpcapi.MandibleService{
		DB:               pool,
		Logger:           logger,
		HeartbeatTimeout: cfg.Thorax.HeartbeatTimeout.Duration,
		ReplicaID:        cfg.ReplicaID,
		Guard:            guard,
		Secrets:          secrets,
		SecretResolver:   secretenv.Resolver{FilesDir: cfg.Secrets.FilesDir},
	})

	tokens, err := newTokenSource(cfg.HTTP, logger)
	if err != nil {
		return err
	}
	events := sse.NewBroker(sse.BrokerOptions{DB: pool, Logger: logger})
	httpServer := &http.Server{
		Addr: cfg.HTTP.Listen,
		Handler: withCodecEndpoint(httpapi.New(httpapi.Options{
			Logger:           logger,
			Registry:         registry,
			DB:               pool,
			Keyring:          tokens.keys,
			MaxBodyBytes:     cfg.HTTP.MaxBodyBytes,
			HeartbeatTimeout: cfg.Thorax.HeartbeatTimeout.Duration,
			Checks:           checks,
			DLQ:              dlq,
			Events:           sse.NewHandler(events, sse.HandlerOptions{Logger: logger}),
			Temporal:         temporal,
			Namespace:        cfg.Temporal.Namespace,
			TemporalUIURL:    cfg.Temporal.UIURL,
			DeploymentQueue:  cfg.Temporal.DeploymentTaskQueue,
			Secrets:          secrets,
		}), cfg, payloadCodec, tokens.keys, logger),
		ReadHeaderTimeout: 10 * time.Second,
	}
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
	analyser := &analysis.Processor{DB: pool, Logger: logger, Refiner: analysis.NewRefiner(cfg.Analysis)}
	g.Go(func() error { return analyser.Run(gctx, analysis.DefaultInterval) })
	if cfg.Queue.Enabled {
		g.Go(func() error { return analysis.Consume(gctx, cfg.Queue, analyser) })
	}
	g.Go(func() error {
		logger.InfoContext(gctx, "serving HTTP", "addr", httpListener.Addr().String(), "tls", cfg.HTTP.TLS())
		if err := httpServer.Serve(httpListener); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		return workers.RunDispatch(gctx, workers.DispatchOptions{
			Client:    temporal,
			Namespace: cfg.Temporal.Namespace,
			DB:        pool,
			ReplicaID: cfg.ReplicaID,
			Input: workflows.DispatcherInput{
				ReplicaID:         cfg.ReplicaID,
				PollInterval:      cfg.Dispatch.PollInterval.Duration,
				BatchSize:         cfg.Dispatch.BatchSize,
				ProcessingTimeout: cfg.Dispatch.ProcessingTimeout.Duration,
			},
			Logger: logger,
			Wakes:  acts.Wakes,
		})
	})
	g.Go(func() error { return tokens.Run(gctx) })
	g.Go(func() error { return hub.Run(gctx) })
	g.Go(func() error {
		identity.WatchExpiry(gctx, logger, idMetrics, cfg.GRPC.CertPath, cfg.HTTP.CertPath, cfg.Queue.ClientCertPath)
		return nil
	})
	g.Go(func() error { return events.Run(gctx) })
	g.Go(func() error {
		return workers.NewMonitor(workers.MonitorOptions{
			DB: pool, Temporal: temporal, Namespace: cfg.Temporal.Namespace, ReplicaID: cfg.ReplicaID,
			HeartbeatTimeout:  cfg.Thorax.HeartbeatTimeout.Duration,
			ResultGrace:       cfg.Thorax.ResultGrace.Duration,
			ProcessingTimeout: cfg.Dispatch.ProcessingTimeout.Duration,
			Logger:            logger,
		}).Run(gctx)
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
	})
	err = g.Wait()
	if ctx.Err() != nil && err == nil {
		logger.InfoContext(ctx, "stopped")
	}
	return err
}

// newGRPCServer builds the server Thorax connects to: mutual TLS, accepting only client
// certificates signed by the configured CA and, through guard, of the thorax role,
// unless grpc.insecure is set for development.
func newGRPCServer(cfg config.Listener, logger *slog.Logger, guard *identity.Guard) (*grpc.Server, error) {
	if cfg.Insecure {
		logger.Warn("gRPC is serving plaintext without client authentication (grpc.insecure = true): development only")
		return grpc.NewServer(), nil
	}
	tlsCfg, err := tlsconf.Server(tlsconf.Files{CA: cfg.CACertPath, Cert: cfg.CertPath, Key: cfg.KeyPath})
	if err != nil {
		return nil, fmt.Errorf("grpc TLS: %w", err)
	}
	return grpc.NewServer(append(grpcapi.ServerOptions(guard), grpc.Creds(credentials.NewTLS(tlsCfg)))...), nil
}

// testHooks builds the activity hooks of the hidden --test-pause-after-claim flag: the
// claim activity blocks after its claim has committed, so a test can kill the replica
// between claim and delivery.
func testHooks(pauseAfterClaim bool, logger *slog.Logger) activities.Hooks {
	if !pauseAfterClaim {
		return activities.Hooks{}
	}
	logger.Warn("test hook active: claims pause before delivery")
	return activities.Hooks{AfterClaim: func(ctx context.Context) {
		logger.Warn("paused after claim")
		<-ctx.Done()
	}}
}
