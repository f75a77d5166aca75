package schema

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// queries runs the statements sqlc generates from schema/queries; it holds no state,
// so every function of the package shares it.
var queries = dbsqlc.New()

// DB is what the query functions need: a pool, a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// TxBeginner starts transactions (a pool or a connection).
type TxBeginner interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrNotFound is returned when a named row does not exist.
var ErrNotFound = errors.New("not found")

// notFound turns pgx.ErrNoRows into ErrNotFound; the one place that does.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
