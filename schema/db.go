package schema

import (
	"context"
	"errors"
	"fmt"

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

// touched maps the outcome of a statement meant to change one named row: its error
// wrapped with what it was doing, ErrNotFound when it changed none.
func touched(n int64, err error, doing string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// convertRows converts rows one by one; the first that does not convert stops it.
func convertRows[R, V any](rows []R, view func(R) (V, error)) ([]V, error) {
	out := make([]V, 0, len(rows))
	for _, r := range rows {
		v, err := view(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// notFound turns pgx.ErrNoRows into ErrNotFound; the one place that does.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// inTx runs f in a transaction of db and commits it when f returns nil.
func inTx(ctx context.Context, db TxBeginner, f func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// nullString is s, or NULL when it is empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// intPtr converts a nullable int4 column to *int.
func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}
