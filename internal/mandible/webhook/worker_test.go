package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const secret = "receiver-secret-0123456789"

// received is one delivery as a receiver saw it.
type received struct {
	payload   api.WebhookPayload
	signature error
}

// receiver is an HTTP server that checks each delivery's signature and reports it.
func receiver(t *testing.T, status int) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 100)
	srv := httptest.NewServer(receiverHandler(got, status))
	t.Cleanup(srv.Close)
	return srv, got
}

func receiverHandler(got chan<- received, status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p api.WebhookPayload
		_ = json.Unmarshal(body, &p)
		got <- received{payload: p, signature: webhook.Verify(secret, r.Header.Get(api.WebhookSignatureHeader), body, time.Now(), time.Minute)}
		w.WriteHeader(status)
	})
}

// run starts a worker (a replica) until the test ends.
func run(t *testing.T, w *webhook.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// addWebhook adds a webhook on url, a receiver of the test on loopback, which it
// allows (allow_private_network).
func addWebhook(t testing.TB, pool *pgxpool.Pool, url string, types ...string) schema.Webhook {
	t.Helper()
	wh, err := schema.CreateWebhook(context.Background(), pool, schema.NewWebhook{URL: url, EventTypes: types, Secret: secret, CreatedBy: "ops",
		AllowPrivateNetwork: true})
	require.NoError(t, err)
	return wh
}

func addEvent(t *testing.T, pool *pgxpool.Pool, typ events.Type) {
	t.Helper()
	require.NoError(t, schema.InsertEvent(context.Background(), pool, nil, typ, map[string]any{"reason": "test"}))
}

// Two replicas deliver each wanted event once, signed so that the receiver's check
// passes, and leave out the events the webhook does not want.
func TestDeliversSignedOncePerEvent(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	srv, got := receiver(t, http.StatusNoContent)
	addWebhook(t, pool, srv.URL, "deployment.*", "step.failed")
	for range 2 {
		run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond})
	}
	want := map[events.Type]int{events.DeploymentStarted: 5, events.StepFailed: 5}
	for i := range 5 {
		addEvent(t, pool, events.DeploymentStarted)
		addEvent(t, pool, events.StepStarted) // not wanted
		addEvent(t, pool, events.StepFailed)
		_ = i
	}
	seen := map[int64]bool{}
	for range 10 {
		select {
		case r := <-got:
			require.NoError(t, r.signature)
			require.False(t, seen[r.payload.ID], "event %d delivered twice", r.payload.ID)
			seen[r.payload.ID] = true
			want[events.Type(r.payload.Type)]--
			require.JSONEq(t, `{"reason":"test"}`, string(mustJSON(t, r.payload.Data)))
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of 10 deliveries arrived", len(seen))
		}
	}
	require.Equal(t, map[events.Type]int{events.DeploymentStarted: 0, events.StepFailed: 0}, want)
	require.Never(t, func() bool { return len(got) > 0 }, 500*time.Millisecond, 50*time.Millisecond, "nothing more is delivered")
}

// A delivery to a receiver that is down is retried with backoff and arrives once
// the receiver is back.
func TestRetriesUntilReceiverIsBack(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // down: connections are refused
	wh := addWebhook(t, pool, "http://"+addr+"/hook", "deployment.*")
	run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 100})
	addEvent(t, pool, events.DeploymentFailed)
	require.Eventually(t, func() bool { return attempts(t, pool, wh) >= 3 }, 30*time.Second, 20*time.Millisecond)

	got := make(chan received, 10)
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	back := &http.Server{Handler: receiverHandler(got, http.StatusOK), ReadHeaderTimeout: time.Second}
	go func() { _ = back.Serve(ln) }()
	t.Cleanup(func() { _ = back.Close() })
	select {
	case r := <-got:
		require.NoError(t, r.signature)
		require.Equal(t, string(events.DeploymentFailed), r.payload.Type)
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery never arrived after the receiver came back")
	}
	var status string
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM webhook_deliveries WHERE webhook_id = $1`, wh.ID).Scan(&status))
		return status == schema.WebhookDeliveryDelivered
	}, 10*time.Second, 20*time.Millisecond)
}

// A delivery whose attempts are spent is failed for good and listed as such, with
// the receiver's last status (never what the receiver wrote).
func TestSpentAttemptsAreListedAsFailures(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		http.Error(w, "receiver broken", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	wh := addWebhook(t, pool, srv.URL, "step.*")
	run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond, BaseBackoff: 10 * time.Millisecond, MaxAttempts: 3})
	addEvent(t, pool, events.StepFailed)
	var failed []schema.WebhookDelivery
	require.Eventually(t, func() bool {
		var err error
		failed, err = schema.WebhookDeliveries(context.Background(), pool, wh.ID, schema.WebhookDeliveryFailed, 10)
		require.NoError(t, err)
		return len(failed) == 1
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 3, failed[0].Attempts)
	require.Equal(t, http.StatusInternalServerError, *failed[0].LastStatus)
	require.Equal(t, "receiver answered 500 Internal Server Error", failed[0].LastError)
	require.Equal(t, string(events.StepFailed), failed[0].EventType)
	require.Never(t, func() bool { mu.Lock(); defer mu.Unlock(); return calls > 3 }, 300*time.Millisecond, 20*time.Millisecond,
		"no send after the last attempt")
}

func attempts(t *testing.T, pool *pgxpool.Pool, wh schema.Webhook) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT coalesce(max(attempts), 0) FROM webhook_deliveries WHERE webhook_id = $1`, wh.ID).Scan(&n)
	require.NoError(t, err)
	return n
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A webhook is sent only what happens after it was created: an event the fan-out has
// not reached yet when the webhook is added is not delivered to it.
func TestWebhookIsNotSentWhatHappenedBeforeIt(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	srv, got := receiver(t, http.StatusNoContent)
	addEvent(t, pool, events.StepFailed) // before the webhook, not yet fanned out
	addWebhook(t, pool, srv.URL, "step.failed")
	run(t, &webhook.Worker{DB: pool, Interval: 20 * time.Millisecond})
	addEvent(t, pool, events.StepFailed)
	select {
	case r := <-got:
		require.NoError(t, r.signature)
	case <-time.After(30 * time.Second):
		t.Fatal("the event after the webhook was never delivered")
	}
	require.Never(t, func() bool { return len(got) > 0 }, 500*time.Millisecond, 50*time.Millisecond, "the earlier event is not delivered")
}
