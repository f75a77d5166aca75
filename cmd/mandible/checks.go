package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
	"github.com/mantis-deploy/mantis/schema"
)

// Names of the checks of mandible check-config --connect.
const (
	checkDatabase       = "postgresql"
	checkDatabaseDirect = "postgresql direct_url"
	checkTemporal       = "temporal"
)

// The statements of the database check: a round trip, and the schema version.
var (
	//go:embed sql/check_round_trip.sql
	selectOneSQL string
	//go:embed sql/check_schema_version.sql
	schemaVersionSQL string
)

// undefinedTableErr is PostgreSQL's code for a missing table: schema_migrations before
// the first migration.
const undefinedTableErr = "42P01"

// dependencyChecks are what mandible check-config --connect reaches: PostgreSQL
// (through database.url, and database.direct_url when it differs), the broker when
// enabled, and Temporal's namespace.
func dependencyChecks(cfg config.Mandible, logger *slog.Logger) []cli.Check {
	checks := []cli.Check{{Name: checkDatabase, Run: func(ctx context.Context) (string, error) {
		return checkPostgres(ctx, "database.url", cfg.Database.URL, cfg.Database.ExecMode(), cfg.ApplicationName())
	}}}
	if cfg.Database.Pooled() {
		checks = append(checks, cli.Check{Name: checkDatabaseDirect, Run: func(ctx context.Context) (string, error) {
			return checkPostgres(ctx, "database.direct_url", cfg.Database.DirectURL, config.QueryExecModeCacheStatement, cfg.ApplicationName())
		}})
	}
	if cfg.Queue.Enabled {
		checks = append(checks, cli.Check{Name: broker.CheckName, Run: func(ctx context.Context) (string, error) {
			return broker.CheckConnection(ctx, cfg.Queue, "mandible "+cfg.ReplicaID+" check-config")
		}})
	}
	checks = append(checks, cli.Check{Name: checkTemporal, Run: func(ctx context.Context) (string, error) {
		return checkTemporalNamespace(ctx, cfg.Temporal, logger)
	}})
	return checks
}

// checkPostgres connects as Mandible would, runs a round trip and reads the schema
// version.
func checkPostgres(ctx context.Context, key, dbURL, execMode, appName string) (string, error) {
	pcfg, err := poolConfig(key, dbURL, execMode, 1, appName)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig)
	if err != nil {
		return "", fmt.Errorf("connecting to %s:%d: %w", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, selectOneSQL); err != nil {
		return "", fmt.Errorf("running SELECT 1: %w", err)
	}
	migrations, err := schema.Migrations()
	if err != nil {
		return "", err
	}
	var version int
	err = conn.QueryRow(ctx, schemaVersionSQL).Scan(&version)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == undefinedTableErr:
		version = 0
	case err != nil:
		return "", fmt.Errorf("reading the schema version: %w", err)
	}
	return fmt.Sprintf("%s:%d, schema version %d of %d", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, version, len(migrations)), nil
}

// checkTemporalNamespace dials Temporal as Mandible would and describes its namespace.
func checkTemporalNamespace(ctx context.Context, cfg config.Temporal, logger *slog.Logger) (string, error) {
	opts, _, err := temporalclient.Options(cfg, logger)
	if err != nil {
		return "", err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return "", fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: opts.Namespace}); err != nil {
		return "", fmt.Errorf("describing namespace %s at %s: %w", opts.Namespace, opts.HostPort, err)
	}
	return fmt.Sprintf("%s namespace %s", opts.HostPort, opts.Namespace), nil
}
