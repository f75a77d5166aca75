package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/schema"
)

// Defaults of a Worker.
const (
	DefaultInterval    = time.Second
	DefaultMaxAttempts = 8
	DefaultBaseBackoff = 2 * time.Second
	DefaultMaxBackoff  = 5 * time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultBatch       = 50
	// MaxPayloadBytes bounds a delivery's body; a larger event fails without a send.
	MaxPayloadBytes = 1 << 20
	// maxAnswerBytes is how much of a receiver's answer is read, and dropped, so
	// that the connection may be used again: an answer is never kept or shown.
	maxAnswerBytes = 4 << 10
	// maxFanOut bounds how many event ids one fan-out covers.
	maxFanOut = 10000
	// senders is how many deliveries one replica sends at once.
	senders = 8
)

// Worker fans the event log out to webhook deliveries and sends them. Every
// Mandible replica runs one: the cursor and the claims live in PostgreSQL (FOR
// UPDATE SKIP LOCKED), so replicas share the work and a restart loses nothing; a
// delivery whose sender died is claimed again when its lease runs out.
type Worker struct {
	DB     *pgxpool.Pool
	Logger *slog.Logger
	// Interval is how often it looks for new events and due deliveries.
	Interval time.Duration
	// MaxAttempts is how many sends a delivery gets before it is failed for good
	// and listed by GET /api/v1/webhooks/{id}/failures.
	MaxAttempts int
	// BaseBackoff doubles after each failed attempt, up to MaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// Timeout bounds one send; a claim's lease is twice it.
	Timeout time.Duration
	// Now is the clock of the signatures (time.Now when nil).
	Now func() time.Time

	horizon horizon
	// public sends the deliveries of webhooks that reach public addresses only,
	// private those of webhooks that allow private networks; neither follows a
	// redirect.
	public, private *http.Client
}

// withDefaults fills the zero fields in.
func (w *Worker) withDefaults() {
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	if w.Interval <= 0 {
		w.Interval = DefaultInterval
	}
	if w.MaxAttempts <= 0 {
		w.MaxAttempts = DefaultMaxAttempts
	}
	if w.BaseBackoff <= 0 {
		w.BaseBackoff = DefaultBaseBackoff
	}
	if w.MaxBackoff <= 0 {
		w.MaxBackoff = DefaultMaxBackoff
	}
	if w.Timeout <= 0 {
		w.Timeout = DefaultTimeout
	}
	if w.public == nil {
		w.public = deliveryClient(w.Timeout, publicOnly)
		w.private = deliveryClient(w.Timeout, nil)
	}
	if w.Now == nil {
		w.Now = time.Now
	}
}

// Run fans out and sends until ctx ends; a failed round is logged and retried at
// the next tick.
func (w *Worker) Run(ctx context.Context) error {
	w.withDefaults()
	tick := time.NewTicker(w.Interval)
	defer tick.Stop()
	for {
		if err := w.Round(ctx); err != nil && ctx.Err() == nil {
			w.Logger.WarnContext(ctx, "webhook round failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Round fans out the events that are final and sends the deliveries due.
func (w *Worker) Round(ctx context.Context) error {
	w.withDefaults()
	if err := w.fanOut(ctx); err != nil {
		return err
	}
	for {
		claimed, err := schema.ClaimWebhookDeliveries(ctx, w.DB, DefaultBatch, 2*w.Timeout)
		if err != nil || len(claimed) == 0 {
			return err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(senders)
		for _, d := range claimed {
			g.Go(func() error { return w.deliver(gctx, d) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
}

// fanOut inserts the deliveries of the events up to the log's final horizon.
func (w *Worker) fanOut(ctx context.Context) error {
	through, ok, err := w.horizon.final(ctx, w.DB)
	if err != nil || !ok {
		return err
	}
	for {
		at, err := w.horizon.cursor(ctx, w.DB)
		if err != nil || at >= through {
			return err
		}
		upTo := min(through, at+maxFanOut)
		n, ran, err := schema.FanOutWebhooks(ctx, w.DB, upTo)
		if err != nil || !ran {
			return err
		}
		if n > 0 {
			w.Logger.DebugContext(ctx, "webhook deliveries queued", "deliveries", n, "through_event_id", upTo)
		}
	}
}

// deliver sends one claimed delivery and records its outcome.
func (w *Worker) deliver(ctx context.Context, d schema.ClaimedDelivery) error {
	status, reason := w.send(ctx, d)
	if reason == "" {
		_, err := schema.MarkWebhookDelivered(ctx, w.DB, d, status)
		return err
	}
	backoff := w.backoff(d.Attempts)
	if _, err := schema.MarkWebhookAttemptFailed(ctx, w.DB, d, status, reason, backoff, w.MaxAttempts); err != nil {
		return err
	}
	attrs := []any{"webhook_id", d.WebhookID, "event_id", d.EventID, "attempt", d.Attempts, "status", status, "reason", reason}
	if d.Attempts >= w.MaxAttempts {
		w.Logger.WarnContext(ctx, "webhook delivery failed for good", attrs...)
	} else {
		w.Logger.InfoContext(ctx, "webhook delivery will be retried", append(attrs, "backoff", backoff)...)
	}
	return nil
}

// backoff is the wait after the attempt-th failed send: BaseBackoff doubled per
// attempt, capped at MaxBackoff.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.BaseBackoff
	for i := 1; i < attempt && d < w.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, w.MaxBackoff)
}

// send posts d's event, signed, and returns the receiver's status and, when the
// send failed, why ("" for a 2xx).
func (w *Worker) send(ctx context.Context, d schema.ClaimedDelivery) (int, string) {
	body, err := json.Marshal(api.WebhookPayload{ID: d.EventID, Type: d.EventType, DeploymentID: d.DeploymentID,
		At: d.EventAt, Data: json.RawMessage(d.EventData)})
	if err != nil {
		return 0, "encoding the event: " + err.Error()
	}
	if len(body) > MaxPayloadBytes {
		return 0, fmt.Sprintf("event is %d bytes, more than %d", len(body), MaxPayloadBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "building the request: " + err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mantis-webhook")
	req.Header.Set(api.WebhookSignatureHeader, Sign(d.Secret, w.Now(), body))
	req.Header.Set(api.WebhookEventHeader, d.EventType)
	req.Header.Set(api.WebhookEventIDHeader, strconv.FormatInt(d.EventID, 10))
	client := w.public
	if d.AllowPrivateNetwork {
		client = w.private
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	return resp.StatusCode, answerProblem(resp.StatusCode)
}

// answerProblem says why a receiver's status failed the delivery, or "" for a 2xx.
// It names the status only: what the receiver wrote (its body, where it redirects)
// is its own, and an API reader of /failures is not to see it.
func answerProblem(status int) string {
	switch {
	case status >= 200 && status < 300:
		return ""
	case status >= 300 && status < 400:
		return fmt.Sprintf("receiver answered %d %s: a redirect, which webhooks do not follow", status, http.StatusText(status))
	default:
		return fmt.Sprintf("receiver answered %d %s", status, http.StatusText(status))
	}
}

// noRedirects is the CheckRedirect of the delivery client: a 3xx is the answer
// itself, never followed, so that a receiver cannot send a delivery (and its
// signature) on to an address the webhook does not name, or turn the POST into a
// GET.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// horizon finds the highest event id below which the log has no gap still to
// fill. Ids are drawn at insert, not commit, so an id may become visible after a
// higher one; once the transactions that were writing when the highest id was read
// have all ended, every id below it is final (schema.EventLogWriters).
type horizon struct {
	candidate int64
	writers   []string
	waiting   bool
}

// final returns the horizon when one is known to be final now.
func (h *horizon) final(ctx context.Context, db *pgxpool.Pool) (int64, bool, error) {
	if h.waiting {
		current, err := schema.EventLogWriters(ctx, db)
		if err != nil {
			return 0, false, err
		}
		for _, id := range h.writers {
			if slices.Contains(current, id) {
				return 0, false, nil
			}
		}
		h.waiting = false
		return h.candidate, true, nil
	}
	latest, err := schema.LatestEventID(ctx, db)
	if err != nil {
		return 0, false, err
	}
	writers, err := schema.EventLogWriters(ctx, db)
	if err != nil {
		return 0, false, err
	}
	if len(writers) == 0 {
		return latest, true, nil
	}
	h.candidate, h.writers, h.waiting = latest, writers, true
	return 0, false, nil
}

// cursor reads where the fan-out stands.
func (h *horizon) cursor(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	return schema.WebhookCursorAt(ctx, db)
}
