package domain

import (
	"strings"
	"time"

	"github.com/google/uuid"
)

// The budget and lifetime of a dispatch request (seed "Competing Consumers": "Failed
// dispatches are retried up to 10 times").
const (
	// MaxDispatchRetries is how many times a request whose delivery failed is delivered
	// again. A delivery is a first delivery or a retry that Mandible makes: a command_queue
	// row written, or an attempt that found no live Thorax. The broker's one free requeue
	// of a nudge is not a delivery, and a command handed back unrun (a Thorax draining or
	// restarting) costs nothing.
	MaxDispatchRetries = 10
	// MaxDispatchDeliveries is the most deliveries a request gets: the first plus
	// MaxDispatchRetries retries. The failure of the last one fails the request, so
	// attempts (which counts failed deliveries) ends at MaxDispatchDeliveries.
	MaxDispatchDeliveries = 1 + MaxDispatchRetries
	// DispatchRequestTTL is how long after creation a request expires, whatever its state.
	// The enqueue passes it to the database; every message about expiry prints it
	// through DispatchRequestTTLText.
	DispatchRequestTTL = 24 * time.Hour
)

// DispatchRequestTTLText is DispatchRequestTTL as messages print it: "24h".
var DispatchRequestTTLText = shortDuration(DispatchRequestTTL)

// Priorities, in claim order.
const (
	PriorityHigh   = "high"
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// Priorities lists the priorities in claim order.
var Priorities = []string{PriorityHigh, PriorityNormal, PriorityLow}

// ValidPriority reports whether p is one of the priorities.
func ValidPriority(p string) bool {
	return p == PriorityHigh || p == PriorityNormal || p == PriorityLow
}

// ClaimedRequest is a request a replica won, with the epoch that fences its outcome.
type ClaimedRequest struct {
	ID        uuid.UUID `json:"id"`
	Epoch     int64     `json:"epoch"`
	Target    string    `json:"target"`
	Priority  string    `json:"priority"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
}

// Delivery outcomes of one claimed request.
const (
	// OutcomeDispatched: a command_queue row was written.
	OutcomeDispatched = "dispatched"
	// OutcomeRetry: the delivery failed; the request is pending again after a backoff.
	OutcomeRetry = "retry"
	// OutcomeFailed: the delivery failed and the budget is spent: it was the last of
	// MaxDispatchDeliveries (a first delivery and MaxDispatchRetries retries).
	OutcomeFailed = "failed"
	// OutcomeExpired: the request passed DispatchRequestTTL before delivery.
	OutcomeExpired = "expired"
	// OutcomeStale: the caller's epoch no longer holds the request (it was reclaimed);
	// the write was refused.
	OutcomeStale = "stale"
)

// ClaimRef names a claimed request and the epoch its holder claimed it with.
type ClaimRef struct {
	ID    uuid.UUID `json:"id"`
	Epoch int64     `json:"epoch"`
}

// DeliveryOutcome is what became of one claimed request.
type DeliveryOutcome struct {
	RequestID     uuid.UUID  `json:"request_id"`
	Outcome       string     `json:"outcome"`
	CommandID     *uuid.UUID `json:"command_id,omitempty"`
	Error         string     `json:"error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Queued is how long the request waited from creation to dispatch.
	Queued time.Duration `json:"queued_ns,omitempty"`
	// Command is the written command, for the broker nudge.
	Command *DispatchedCommand `json:"command,omitempty"`
}

// DispatchedCommand is the part of a written command_queue row a nudge carries.
type DispatchedCommand struct {
	ID                 uuid.UUID  `json:"id"`
	Target             string     `json:"target"`
	Mode               string     `json:"mode"`
	Priority           string     `json:"priority"`
	AssignedInstanceID *uuid.UUID `json:"assigned_instance_id,omitempty"`
	MaxRetries         int        `json:"max_retries"`
	// TraceParent is the W3C trace context the request was enqueued in, "" for none.
	TraceParent string `json:"trace_parent,omitempty"`
}

// ReclaimedRequest is an orphan returned to pending: its holder kept it in processing
// past the processing timeout.
type ReclaimedRequest struct {
	ID        uuid.UUID `json:"id"`
	OldHolder string    `json:"old_holder"`
	NewEpoch  int64     `json:"new_epoch"`
}

// RedispatchResult is what became of a request whose delivery failed after dispatch.
type RedispatchResult struct {
	RequestID     uuid.UUID  `json:"request_id"`
	CommandID     uuid.UUID  `json:"command_id"`
	Outcome       string     `json:"outcome"` // OutcomeRetry or OutcomeFailed
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// shortDuration prints d without the zero minutes and seconds time.Duration adds.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
