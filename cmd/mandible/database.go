package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/schema"
)

// databaseWait bounds how long Mandible waits for its database to accept connections
// at start-up (replicas often start alongside their database).
const databaseWait = 30 * time.Second

// openDatabase connects to PostgreSQL as appName (unless database.url sets its own
// application_name), waiting up to databaseWait for it to accept connections.
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
	deadline := time.Now().Add(databaseWait)
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

// openMigrated opens the database and applies the pending schema migrations.
func openMigrated(ctx context.Context, cfg config.Mandible, logger *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := openDatabase(ctx, cfg.Database, cfg.ApplicationName(), logger)
	if err != nil {
		return nil, err
	}
	applied, err := schema.Migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if len(applied) > 0 {
		logger.InfoContext(ctx, "applied schema migrations", "versions", applied)
	}
	return pool, nil
}

// migrate applies the pending schema migrations and says what it did on out.
func migrate(ctx context.Context, cfg config.Mandible, logger *slog.Logger, out io.Writer) error {
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
