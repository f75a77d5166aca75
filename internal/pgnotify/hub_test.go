package pgnotify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/pgnotify"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// wakeWithin waits for a wake-up of sub, failing the test after d.
func wakeWithin(t *testing.T, sub *pgnotify.Subscription, d time.Duration) {
	t.Helper()
	select {
	case <-sub.C:
	case <-time.After(d):
		require.FailNow(t, "no wake-up", "within %s", d)
	}
}

// A subscriber is woken by a notification of its channel and payload, sent the way the
// migrations' triggers send it, and not by another payload.
func TestHubWakesTheSubscriberOfChannelAndPayload(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := testenv.MigratedPool(t)
	hub := pgnotify.NewHub(pool, slog.New(slog.DiscardHandler), schema.DeploymentResultsChannel)
	deployment := uuid.NewString()
	sub := hub.Subscribe(schema.DeploymentResultsChannel, deployment)
	defer sub.Close()
	other := hub.Subscribe(schema.DeploymentResultsChannel, uuid.NewString())
	defer other.Close()
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()

	// Every subscriber is woken once the hub listens, since it may have missed
	// notifications while it was not.
	wakeWithin(t, sub, 10*time.Second)
	wakeWithin(t, other, 10*time.Second)

	_, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, string(schema.DeploymentResultsChannel), deployment)
	require.NoError(t, err)
	wakeWithin(t, sub, 10*time.Second)
	require.Empty(t, other.C, "another payload's subscriber is not woken")

	cancel()
	require.NoError(t, <-done)
}
