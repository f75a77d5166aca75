package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/pgnotify"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
	"github.com/mantis-deploy/mantis/workers"
	"github.com/mantis-deploy/mantis/workflows"
)

// shutdownGrace bounds how long serving stops take after SIGTERM.
const shutdownGrace = 20 * time.Second

// serveOptions are the flags of serve that are not configuration.
type serveOptions struct {
	pauseAfterClaim bool
}

// serve runs the replica until ctx ends: it migrates the schema, connects to Temporal,
// starts the replica's workers (declaring the broker topology first), then serves the
// HTTP API and the gRPC service for Thorax with the background loops beside them.
func serve(ctx context.Context, cfg config.Mandible, logger *slog.Logger, opts serveOptions) error {
	logger = slog.New(httpapi.LogHandler(logger.Handler())) // an HTTP request's id on every line logged for it
	logger.InfoContext(ctx, "starting mandible", "replica_id", cfg.ReplicaID, "config", cfg)
	dbs, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer dbs.Close()
	if err := startProfiling(ctx, cfg.Debug, logger); err != nil {
		return err
	}
	registry := newRegistry()
	temporal, payloadCodec, err := connectTemporal(ctx, &cfg, logger, registry)
	if err != nil {
		return err
	}
	defer temporal.Close()

	r := &replica{cfg: cfg, logger: logger, pool: dbs.pool, direct: dbs.direct, temporal: temporal, codec: payloadCodec, registry: registry}
	if payloadCodec != nil {
		r.secrets = payloadCodec // stays a nil interface (not a nil *codec.Codec) without a keyring
	}
	r.acts = r.newActivities(opts)
	r.checks = r.healthChecks()
	if cfg.Queue.Enabled {
		b := broker.NewClient(cfg.Queue, "mandible "+cfg.ReplicaID, logger)
		defer b.Close()
		r.acts.Broker = b
		r.checks["broker"] = b.Ping
		r.dlq = broker.NewDLQ(cfg.Queue, "mandible "+cfg.ReplicaID+" dlq")
		r.registry.MustRegister(httpapi.NewDLQCollector(r.dlq))
	} else {
		logger.WarnContext(ctx, "running without a broker ([queue] enabled = false): Thorax finds commands by polling")
	}
	r.hub = pgnotify.NewHub(dbs.direct, logger, activities.ResultsChannel) // LISTEN needs a session
	r.acts.Notifications = r.hub

	w, err := workers.StartReplicaWorker(temporal, cfg.ReplicaID, r.acts)
	if err != nil {
		return err
	}
	defer w.Stop()
	dw, err := workers.StartDeploymentWorker(temporal, cfg.Temporal.DeploymentTaskQueue, r.acts)
	if err != nil {
		return err
	}
	defer dw.Stop()
	if err := r.declareTopology(ctx); err != nil {
		return err
	}
	return r.serve(ctx)
}

// startProfiling serves Go profiles on debug.pprof_listen, when set, until ctx ends.
func startProfiling(ctx context.Context, cfg config.Debug, logger *slog.Logger) error {
	if cfg.PprofListen == "" {
		return nil
	}
	s, err := metricsserver.ListenProfiling(cfg.PprofListen)
	if err != nil {
		return err
	}
	go func() {
		if err := s.Run(ctx, logger); err != nil {
			logger.ErrorContext(ctx, "profiling listener stopped", "error", err)
		}
	}()
	return nil
}

// connectTemporal dials Temporal with the configured options and makes sure the
// namespace knows Mantis's search attributes. It sets cfg's Temporal address and
// namespace to those dialled (a profile may choose them), and returns the payload
// codec, nil when payloads are not encrypted. The SDK's own metrics go to registry.
func connectTemporal(ctx context.Context, cfg *config.Mandible, logger *slog.Logger, registry prometheus.Registerer) (client.Client, *codec.Codec, error) {
	temporalOpts, payloadCodec, err := temporalclient.Options(cfg.Temporal, logger)
	if err != nil {
		return nil, nil, err
	}
	temporalOpts.MetricsHandler = temporalclient.NewMetricsHandler(registry)
	cfg.Temporal.Address, cfg.Temporal.Namespace = temporalOpts.HostPort, temporalOpts.Namespace
	if payloadCodec == nil {
		logger.WarnContext(ctx, "Temporal payloads are not encrypted: set temporal.codec_key_file or temporal.codec_keys_dir")
	}
	temporal, err := client.DialContext(ctx, temporalOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to Temporal at %s: %w", cfg.Temporal.Address, err)
	}
	if err := workers.PrepareNamespace(ctx, workers.NamespaceSetup{
		Client: temporal, Namespace: cfg.Temporal.Namespace, Keys: workflows.SearchAttributes(),
		Mode: cfg.Temporal.SearchAttributes, Wait: cfg.Temporal.SearchAttributesWait.Duration, Logger: logger,
	}); err != nil {
		temporal.Close()
		return nil, nil, err
	}
	return temporal, payloadCodec, nil
}

// newRegistry is the registry of Mandible's /metrics, with the Go and process
// collectors and mantis_build_info.
func newRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metricsserver.NewBuildInfo())
	return registry
}

// replica is what one serving Mandible replica is built from.
type replica struct {
	cfg    config.Mandible
	logger *slog.Logger
	pool   *pgxpool.Pool
	// direct is the pool of session connections (LISTEN): database.direct_url's, or
	// pool itself without a pooler.
	direct   *pgxpool.Pool
	temporal client.Client
	codec    *codec.Codec
	// secrets seals and opens secret env values; nil without a keyring.
	secrets  secretenv.Keyring
	registry *prometheus.Registry
	acts     *activities.Activities
	checks   map[string]httpapi.Check
	// dlq stays nil without a broker.
	dlq httpapi.DLQ
	hub *pgnotify.Hub
}

// newActivities builds the replica's activities (the broker and the notification hub
// are set once they exist).
func (r *replica) newActivities(opts serveOptions) *activities.Activities {
	return &activities.Activities{
		DB:      r.pool,
		Logger:  r.logger,
		Metrics: activities.NewMetrics(r.registry, r.pool),
		Dispatch: activities.DispatchConfig{
			ProcessingTimeout: r.cfg.Dispatch.ProcessingTimeout.Duration,
			DeliveryTimeout:   r.cfg.Dispatch.DeliveryTimeout.Duration,
			HeartbeatTimeout:  r.cfg.Thorax.HeartbeatTimeout.Duration,
		},
		Wakes:       &activities.WakeCoalescer{},
		Hooks:       testHooks(opts.pauseAfterClaim, r.logger),
		Secrets:     r.secrets,
		Deployments: workers.DeploymentLookup{Client: r.temporal},
	}
}

// healthChecks are the readiness checks of /readyz (the broker's is added with it).
func (r *replica) healthChecks() map[string]httpapi.Check {
	return map[string]httpapi.Check{
		"database": func(ctx context.Context) error { return r.pool.Ping(ctx) },
		"temporal": func(ctx context.Context) error {
			_, err := r.temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	}
}

// declareTopology declares the RabbitMQ topology through the replica's topology
// workflow before the replica serves, when a broker is configured.
func (r *replica) declareTopology(ctx context.Context) error {
	if !r.cfg.Queue.Enabled {
		return nil
	}
	topo, err := workers.DeclareTopology(ctx, r.temporal, r.cfg.ReplicaID)
	if err != nil {
		return err
	}
	r.logger.InfoContext(ctx, "declared RabbitMQ topology", "vhost", r.cfg.Queue.VHost,
		"exchanges", len(topo.Exchanges), "queues", len(topo.Queues), "bindings", topo.Bindings)
	return nil
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
