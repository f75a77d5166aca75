package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/schema"
)

// databaseWait bounds how long Mandible waits for its database to accept connections
// at start-up (replicas often start alongside their database).
const databaseWait = 30 * time.Second

// directMaxConns sizes the pool of session connections behind a pooler: the dispatch
// LISTEN, the notification hub's LISTEN and the migrations, one each.
const directMaxConns = 4

// execModes maps database.query_exec_mode to pgx's modes.
var execModes = map[string]pgx.QueryExecMode{
	config.QueryExecModeCacheStatement: pgx.QueryExecModeCacheStatement,
	config.QueryExecModeCacheDescribe:  pgx.QueryExecModeCacheDescribe,
	config.QueryExecModeDescribeExec:   pgx.QueryExecModeDescribeExec,
	config.QueryExecModeExec:           pgx.QueryExecModeExec,
	config.QueryExecModeSimpleProtocol: pgx.QueryExecModeSimpleProtocol,
}

// poolConfig parses a database URL as a pool of maxConns connections named appName
// (unless the URL names its own application_name) that send queries in execMode
// (unless the URL sets default_query_exec_mode), each connection's types registered
// (schema.RegisterTypes).
func poolConfig(key, dbURL, execMode string, maxConns int, appName string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pcfg.MaxConns = int32(maxConns)
	if _, set := pcfg.ConnConfig.RuntimeParams["application_name"]; !set {
		pcfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	if mode, ok := execModes[execMode]; ok && !strings.Contains(dbURL, "default_query_exec_mode") {
		pcfg.ConnConfig.DefaultQueryExecMode = mode
	}
	pcfg.AfterConnect = schema.AfterConnect
	return pcfg, nil
}

// openDatabase connects to PostgreSQL through database.url as appName, in the query
// mode database.query_exec_mode resolves to, waiting up to databaseWait for it to
// accept connections.
func openDatabase(ctx context.Context, cfg config.Database, appName string, logger *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := poolConfig("database.url", cfg.URL, cfg.ExecMode(), cfg.MaxConns, appName)
	if err != nil {
		return nil, err
	}
	return openPool(ctx, pcfg, logger)
}

// openDirect connects to PostgreSQL itself, for what needs a session (LISTEN, the
// migrations' advisory lock): database.direct_url when it differs from database.url,
// else pool itself.
func openDirect(ctx context.Context, cfg config.Database, appName string, pool *pgxpool.Pool, logger *slog.Logger) (*pgxpool.Pool, error) {
	if !cfg.Pooled() {
		return pool, nil
	}
	pcfg, err := poolConfig("database.direct_url", cfg.DirectURL, config.QueryExecModeCacheStatement, min(cfg.MaxConns, directMaxConns), appName)
	if err != nil {
		return nil, err
	}
	return openPool(ctx, pcfg, logger)
}

// openPool opens pcfg's pool and waits up to databaseWait for a connection.
func openPool(ctx context.Context, pcfg *pgxpool.Config, logger *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening database pool: %w", err)
	}
	deadline := time.Now().Add(databaseWait)
	for {
		err := pool.Ping(ctx)
		if err == nil {
			return pool, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("connecting to database at %s:%d: %w", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, err)
		}
		logger.WarnContext(ctx, "database not reachable yet, retrying", "host", pcfg.ConnConfig.Host, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// databases are the replica's two pools: pool for queries and transactions (through
// a pooler when one is configured), direct for sessions. Without a pooler they are
// the same pool.
type databases struct {
	pool, direct *pgxpool.Pool
}

// Close closes both pools.
func (d databases) Close() {
	if d.direct != d.pool {
		d.direct.Close()
	}
	d.pool.Close()
}

// openDatabases opens both pools.
func openDatabases(ctx context.Context, cfg config.Mandible, logger *slog.Logger) (databases, error) {
	pool, err := openDatabase(ctx, cfg.Database, cfg.ApplicationName(), logger)
	if err != nil {
		return databases{}, err
	}
	direct, err := openDirect(ctx, cfg.Database, cfg.ApplicationName(), pool, logger)
	if err != nil {
		pool.Close()
		return databases{}, err
	}
	if cfg.Database.Pooled() {
		logger.InfoContext(ctx, "database through a pooler; sessions direct",
			"query_exec_mode", cfg.Database.ExecMode(), "direct_max_conns", direct.Config().MaxConns)
	}
	return databases{pool: pool, direct: direct}, nil
}

// openMigrated opens the databases and applies the pending schema migrations over a
// direct session (they hold an advisory lock for the whole run).
func openMigrated(ctx context.Context, cfg config.Mandible, logger *slog.Logger) (databases, error) {
	dbs, err := openDatabases(ctx, cfg, logger)
	if err != nil {
		return databases{}, err
	}
	applied, err := schema.Migrate(ctx, dbs.direct)
	if err != nil {
		dbs.Close()
		return databases{}, err
	}
	if len(applied) > 0 {
		logger.InfoContext(ctx, "applied schema migrations", "versions", applied)
	}
	return dbs, nil
}

// migrate applies the pending schema migrations and says what it did on out.
func migrate(ctx context.Context, cfg config.Mandible, logger *slog.Logger, out io.Writer) error {
	dbs, err := openDatabases(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer dbs.Close()
	applied, err := schema.Migrate(ctx, dbs.direct)
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
