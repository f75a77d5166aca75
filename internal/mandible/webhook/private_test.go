package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// A webhook reaches a loopback address only when it allows private networks: one
// at 127.0.0.1, or at a name that resolves there, without the opt-in is refused when
// it connects, and the receiver sees nothing; the same receiver behind a webhook
// with the opt-in gets its delivery.
func TestLoopbackReceiverNeedsTheOptIn(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	byName := "http://localhost:" + u.Port() + "/hook"

	add := func(target string, allow bool) schema.NewWebhook {
		return schema.NewWebhook{URL: target, EventTypes: []string{"step.*"}, Secret: secret, CreatedBy: "ops", AllowPrivateNetwork: allow}
	}
	ctx := context.Background()
	byIP, err := schema.CreateWebhook(ctx, pool, add(srv.URL, false))
	require.NoError(t, err)
	named, err := schema.CreateWebhook(ctx, pool, add(byName, false))
	require.NoError(t, err)
	allowed, err := schema.CreateWebhook(ctx, pool, add(srv.URL, true))
	require.NoError(t, err)
	require.True(t, allowed.AllowPrivateNetwork)
	run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond, MaxAttempts: 1})
	addEvent(t, pool, events.StepFailed)

	o := ended(t, pool, byIP)
	require.Equal(t, "failed", o.status)
	require.Nil(t, o.lastStatus, "never connected")
	require.Contains(t, o.lastError, "127.0.0.1 is a loopback address: the webhook needs allow_private_network to reach it")
	o = ended(t, pool, named)
	require.Equal(t, "failed", o.status)
	require.Contains(t, o.lastError, "is a loopback address: the webhook needs allow_private_network")
	o = ended(t, pool, allowed)
	require.Equal(t, "delivered", o.status)
	require.Equal(t, int64(1), reached.Load(), "only the webhook that allows it reaches the receiver")
}
