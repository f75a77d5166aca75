package schema

import (
	"strings"
	"time"
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

// expiredText is the error a request past DispatchRequestTTL ends with.
var expiredText = "expired " + DispatchRequestTTLText + " after creation"

// shortDuration prints d without the zero minutes and seconds time.Duration adds.
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

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

// InputError lists every problem with a request, each naming its field.
type InputError struct{ Problems []string }

func (e *InputError) Error() string {
	return "invalid request: " + strings.Join(e.Problems, "; ")
}
