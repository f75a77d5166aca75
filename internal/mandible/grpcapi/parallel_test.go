package grpcapi_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// allowParallel raises the per-target concurrency default (one running command) so
// that tests about results and leases may hold many commands of one target at once.
func allowParallel(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	_, err := schema.SetLimit(context.Background(), pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget,
		MaxRunning: schema.MaxLimitRunning}, "test")
	require.NoError(tb, err)
}
