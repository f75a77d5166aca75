package api

import (
	"time"

	"github.com/google/uuid"
)

// NewWebhook is the body of POST /api/v1/webhooks.
type NewWebhook struct {
	// URL receives a POST per event; http or https only.
	URL string `json:"url"`
	// EventTypes are the deployment.* and step.* event types it wants, exact
	// ("deployment.failed") or by prefix ("step.*").
	EventTypes []string `json:"event_types"`
	// Secret keys the signature of every delivery (WebhookSignatureHeader).
	Secret string `json:"secret"`
	// AllowPrivateNetwork lets deliveries reach a loopback, private, link-local or
	// otherwise non-public address; without it such an address is refused when the
	// delivery connects, whatever name the URL gives.
	AllowPrivateNetwork bool `json:"allow_private_network,omitempty"`
}

// Webhook is a stored webhook; its secret is never shown again.
type Webhook struct {
	ID         uuid.UUID `json:"id"`
	URL        string    `json:"url"`
	EventTypes []string  `json:"event_types"`
	// AllowPrivateNetwork is set when its deliveries may reach non-public addresses.
	AllowPrivateNetwork bool      `json:"allow_private_network"`
	CreatedBy           string    `json:"created_by"`
	CreatedAt           time.Time `json:"created_at"`
}

// WebhookList is the answer to GET /api/v1/webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookDelivery is one event's delivery to a webhook; GET
// /api/v1/webhooks/{id}/failures lists those whose attempts are spent.
type WebhookDelivery struct {
	ID           int64      `json:"id"`
	EventID      int64      `json:"event_id"`
	EventType    string     `json:"event_type"`
	DeploymentID *uuid.UUID `json:"deployment_id,omitempty"`
	Status       string     `json:"status"`
	Attempts     int        `json:"attempts"`
	// LastStatus is the receiver's last HTTP status, absent when it never answered.
	LastStatus *int       `json:"last_status,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
}

// WebhookDeliveryList is the answer to GET /api/v1/webhooks/{id}/failures.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// WebhookPayload is the JSON body of every delivery: one event of the log.
type WebhookPayload struct {
	// ID is the event's id in the log (the SSE event id); a receiver may see an id
	// twice and should ignore the second.
	ID           int64      `json:"id"`
	Type         string     `json:"type"`
	DeploymentID *uuid.UUID `json:"deployment_id,omitempty"`
	At           time.Time  `json:"at"`
	Data         any        `json:"data"`
}

// Headers of a webhook delivery.
const (
	// WebhookSignatureHeader is "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">".
	WebhookSignatureHeader = "Mantis-Signature"
	// WebhookEventHeader names the event's type; WebhookEventIDHeader its id.
	WebhookEventHeader   = "Mantis-Event"
	WebhookEventIDHeader = "Mantis-Event-Id"
)
