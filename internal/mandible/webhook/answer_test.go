package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// outcome is how a webhook's one delivery ended.
type outcome struct {
	status     string
	lastStatus *int
	lastError  string
}

// ended waits until wh's one delivery is no longer pending and returns how it ended.
func ended(t *testing.T, pool *pgxpool.Pool, wh schema.Webhook) outcome {
	t.Helper()
	var o outcome
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(),
			`SELECT status, last_status, coalesce(last_error, '') FROM webhook_deliveries WHERE webhook_id = $1`, wh.ID).
			Scan(&o.status, &o.lastStatus, &o.lastError)
		return err == nil && o.status != "pending"
	}, 30*time.Second, 20*time.Millisecond, "the delivery never ended")
	return o
}

// A receiver that redirects fails the delivery with its 3xx: nothing is sent where
// it points (not the POST, not a GET it would turn into), and the failure says why
// without naming the place.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	var reached atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(elsewhere.Close)
	redirector := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/internal/admin", http.StatusSeeOther))
	t.Cleanup(redirector.Close)
	wh := addWebhook(t, pool, redirector.URL, "step.*")
	run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond, MaxAttempts: 1})
	addEvent(t, pool, events.StepFailed)

	o := ended(t, pool, wh)
	require.Zero(t, reached.Load(), "no request reaches the redirect's target")
	require.Equal(t, "failed", o.status)
	require.NotNil(t, o.lastStatus)
	require.Equal(t, http.StatusSeeOther, *o.lastStatus)
	require.Equal(t, "receiver answered 303 See Other: a redirect, which webhooks do not follow", o.lastError)
}

// What a failing receiver writes is not kept: the failure names its status only.
func TestReceiverAnswerIsNotEchoed(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "db password=hunter2 at 10.0.0.7", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	wh := addWebhook(t, pool, srv.URL, "step.*")
	run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond, MaxAttempts: 1})
	addEvent(t, pool, events.StepFailed)

	o := ended(t, pool, wh)
	require.Equal(t, "failed", o.status)
	require.Equal(t, "receiver answered 502 Bad Gateway", o.lastError)
	require.NotContains(t, o.lastError, "hunter2")
}
