package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// States of a webhook delivery (webhook_deliveries.status).
const (
	WebhookDeliveryPending   = "pending"
	WebhookDeliveryDelivered = "delivered"
	WebhookDeliveryFailed    = "failed"
)

// NewWebhook is a webhook to store; its fields are checked by the caller.
type NewWebhook struct {
	URL        string
	EventTypes []string
	Secret     string
	CreatedBy  string
	// AllowPrivateNetwork lets its deliveries reach non-public addresses.
	AllowPrivateNetwork bool
}

// Webhook is a stored webhook, without its secret.
type Webhook struct {
	ID         uuid.UUID
	URL        string
	EventTypes []string
	// AllowPrivateNetwork lets its deliveries reach non-public addresses.
	AllowPrivateNetwork bool
	CreatedBy           string
	CreatedAt           time.Time
}

// WebhookDelivery is one event's delivery to a webhook.
type WebhookDelivery struct {
	ID           int64
	EventID      int64
	EventType    string
	DeploymentID *uuid.UUID
	Status       string
	Attempts     int
	// LastStatus is the receiver's last HTTP status, nil when it never answered.
	LastStatus *int
	LastError  string
	CreatedAt  time.Time
	EndedAt    *time.Time
}

// CreateWebhook stores w under a new id.
func CreateWebhook(ctx context.Context, db DB, w NewWebhook) (Webhook, error) {
	row, err := queries.InsertWebhook(ctx, db, dbsqlc.InsertWebhookParams{
		ID: uuid.Must(uuid.NewV7()), Url: w.URL, EventTypes: w.EventTypes, Secret: w.Secret, CreatedBy: w.CreatedBy,
		AllowPrivateNetwork: w.AllowPrivateNetwork,
	})
	if err != nil {
		return Webhook{}, fmt.Errorf("creating webhook: %w", err)
	}
	return webhookView(row), nil
}

// ListWebhooks returns every webhook, oldest first, without their secrets.
func ListWebhooks(ctx context.Context, db DB) ([]Webhook, error) {
	rows, err := queries.ListWebhooks(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("listing webhooks: %w", err)
	}
	out := make([]Webhook, len(rows))
	for i, r := range rows {
		out[i] = webhookView(r)
	}
	return out, nil
}

// GetWebhook returns the webhook id, without its secret; ErrNotFound when there is
// none.
func GetWebhook(ctx context.Context, db DB, id uuid.UUID) (Webhook, error) {
	r, err := queries.GetWebhook(ctx, db, id)
	if err != nil {
		return Webhook{}, fmt.Errorf("reading webhook %s: %w", id, notFound(err))
	}
	return webhookView(r), nil
}

// DeleteWebhook removes a webhook and its deliveries; ErrNotFound when there is none.
func DeleteWebhook(ctx context.Context, db DB, id uuid.UUID) error {
	n, err := queries.DeleteWebhook(ctx, db, id)
	if err != nil {
		return fmt.Errorf("deleting webhook %s: %w", id, err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// WebhookDeliveries returns up to limit of a webhook's deliveries in status, newest
// first; ErrNotFound when there is no such webhook.
func WebhookDeliveries(ctx context.Context, db DB, id uuid.UUID, status string, limit int) ([]WebhookDelivery, error) {
	if _, err := queries.GetWebhook(ctx, db, id); err != nil {
		return nil, fmt.Errorf("reading webhook %s: %w", id, notFound(err))
	}
	rows, err := queries.ListWebhookDeliveries(ctx, db, dbsqlc.ListWebhookDeliveriesParams{WebhookID: id, Status: status, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing the deliveries of webhook %s: %w", id, err)
	}
	out := make([]WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = WebhookDelivery{ID: r.ID, EventID: r.EventID, EventType: r.EventType, DeploymentID: r.DeploymentID,
			Status: r.Status, Attempts: int(r.Attempts), LastStatus: intPtr(r.LastStatus), CreatedAt: r.CreatedAt, EndedAt: r.EndedAt}
		if r.LastError != nil {
			out[i].LastError = *r.LastError
		}
	}
	return out, nil
}

// FanOutWebhooks moves the fan-out cursor to through, inserting a delivery for every
// webhook that wants an event up to it. Only one replica fans out at a time: when
// another holds the cursor, it returns false and does nothing. Inserting is
// idempotent, so a fan-out that died before it committed is simply done again.
func FanOutWebhooks(ctx context.Context, db TxBeginner, through int64) (inserted int64, ran bool, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		after, err := queries.LockWebhookCursor(ctx, tx)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("locking the webhook cursor: %w", err)
		}
		ran = true
		if through <= after {
			return nil
		}
		if inserted, err = queries.FanOutEvents(ctx, tx, dbsqlc.FanOutEventsParams{After: after, Through: through}); err != nil {
			return fmt.Errorf("fanning events %d-%d out to webhooks: %w", after+1, through, err)
		}
		return queries.MoveWebhookCursor(ctx, tx, through)
	})
	return inserted, ran, err
}

// ClaimedDelivery is a delivery claimed for one send: Attempts is its fencing token.
type ClaimedDelivery struct {
	ID        int64
	Attempts  int
	WebhookID uuid.UUID
	URL       string
	Secret    string
	// AllowPrivateNetwork lets the send reach a non-public address.
	AllowPrivateNetwork bool
	EventID             int64
	EventType           string
	DeploymentID        *uuid.UUID
	EventData           []byte
	EventAt             time.Time
}

// ClaimWebhookDeliveries claims up to limit due deliveries, each leased for lease
// (after which another sender may claim it again).
func ClaimWebhookDeliveries(ctx context.Context, db DB, limit int, lease time.Duration) ([]ClaimedDelivery, error) {
	rows, err := queries.ClaimWebhookDeliveries(ctx, db, dbsqlc.ClaimWebhookDeliveriesParams{LeaseSeconds: lease.Seconds(), MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("claiming webhook deliveries: %w", err)
	}
	out := make([]ClaimedDelivery, len(rows))
	for i, r := range rows {
		out[i] = ClaimedDelivery{ID: r.ID, Attempts: int(r.Attempts), WebhookID: r.WebhookID, URL: r.Url, Secret: r.Secret,
			AllowPrivateNetwork: r.AllowPrivateNetwork, EventID: r.EventID, EventType: r.EventType, DeploymentID: r.DeploymentID, EventData: r.EventData, EventAt: r.EventAt}
	}
	return out, nil
}

// MarkWebhookDelivered records a delivery's success; false when the claim was stale.
func MarkWebhookDelivered(ctx context.Context, db DB, d ClaimedDelivery, status int) (bool, error) {
	s := int32(status)
	n, err := queries.MarkWebhookDelivered(ctx, db, dbsqlc.MarkWebhookDeliveredParams{ID: d.ID, Attempts: int32(d.Attempts), LastStatus: &s})
	if err != nil {
		return false, fmt.Errorf("recording delivery %d: %w", d.ID, err)
	}
	return n == 1, nil
}

// MarkWebhookAttemptFailed records a failed send: the delivery is retried after
// backoff, or failed for good once its attempts reach maxAttempts. status is the
// receiver's HTTP status, 0 when it never answered. False when the claim was stale.
func MarkWebhookAttemptFailed(ctx context.Context, db DB, d ClaimedDelivery, status int, reason string, backoff time.Duration, maxAttempts int) (bool, error) {
	var s *int32
	if status > 0 {
		v := int32(status)
		s = &v
	}
	n, err := queries.MarkWebhookAttemptFailed(ctx, db, dbsqlc.MarkWebhookAttemptFailedParams{
		ID: d.ID, Attempts: int32(d.Attempts), MaxAttempts: int32(maxAttempts), BackoffSeconds: backoff.Seconds(),
		LastStatus: s, LastError: &reason,
	})
	if err != nil {
		return false, fmt.Errorf("recording the failed attempt %d of delivery %d: %w", d.Attempts, d.ID, err)
	}
	return n == 1, nil
}

// webhookView is a stored webhook without its secret.
func webhookView(r dbsqlc.Webhook) Webhook {
	return Webhook{ID: r.ID, URL: r.Url, EventTypes: r.EventTypes, AllowPrivateNetwork: r.AllowPrivateNetwork,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

// WebhookCursorAt returns the id of the last event fanned out to webhooks.
func WebhookCursorAt(ctx context.Context, db DB) (int64, error) {
	at, err := queries.WebhookCursor(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("reading the webhook cursor: %w", err)
	}
	return at, nil
}
