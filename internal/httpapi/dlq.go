package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// DLQ is the broker's dead-letter queue, mantis.dlq, as the API manages it
// (broker.DLQ). It is nil when Mandible runs without a broker.
type DLQ interface {
	List(ctx context.Context, limit int) (broker.DLQListing, error)
	Requeue(ctx context.Context, to string, limit int) (int, error)
	Purge(ctx context.Context) (int, error)
}

// Limits of GET /api/v1/dlq.
const (
	defaultDLQList = 20
	maxDLQList     = 1000
)

// DLQRequeueBody is the body of POST /api/v1/dlq/requeue.
type DLQRequeueBody struct {
	// To is the priority queue the messages go back to: high, normal or low.
	To string `json:"to"`
	// Limit is the most messages moved; 0 moves every message the DLQ holds
	// when the call begins.
	Limit int `json:"limit"`
}

// DLQRequeueResult answers POST /api/v1/dlq/requeue.
type DLQRequeueResult struct {
	Requeued int    `json:"requeued"`
	To       string `json:"to"`
	Queue    string `json:"queue"`
}

// DLQPurgeBody is the body of POST /api/v1/dlq/purge; Confirm must be true.
type DLQPurgeBody struct {
	Confirm bool `json:"confirm"`
}

// DLQPurgeResult answers POST /api/v1/dlq/purge.
type DLQPurgeResult struct {
	Purged int `json:"purged"`
}

// withDLQ answers 503 when Mandible runs without a broker.
func withDLQ(d DLQ, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d == nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable",
				"this Mandible runs without a broker ([queue] enabled = false): there is no dead-letter queue")
			return
		}
		h(w, r)
	}
}

// writeBrokerError answers 502 for a broker that failed the operation.
func (s *server) writeBrokerError(w http.ResponseWriter, r *http.Request, op string, err error) {
	s.logger.WarnContext(r.Context(), "dlq operation failed", "op", op, "err", err)
	writeError(w, http.StatusBadGateway, "broker_error", fmt.Sprintf("%s: %v", op, err))
}

// listDLQ answers GET /api/v1/dlq?limit=N (default 20, 0-1000): the DLQ's depth
// and up to N messages from its head, with their x-death headers. Listing
// leaves the messages in place.
func (s *server) listDLQ(d DLQ) http.HandlerFunc {
	return withDLQ(d, func(w http.ResponseWriter, r *http.Request) {
		limit := defaultDLQList
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxDLQList {
				writeError(w, http.StatusBadRequest, "invalid_argument", "bad limit",
					FieldProblem{Field: "limit", Problem: fmt.Sprintf("must be 0-%d, got %q", maxDLQList, v)})
				return
			}
			limit = n
		}
		listing, err := d.List(r.Context(), limit)
		if err != nil {
			s.writeBrokerError(w, r, "listing "+broker.DeadLetterQ, err)
			return
		}
		writeJSON(w, http.StatusOK, listing)
	})
}

// requeueDLQ answers POST /api/v1/dlq/requeue {"to": "high|normal|low", "limit": N}.
func (s *server) requeueDLQ(d DLQ) http.HandlerFunc {
	return withDLQ(d, func(w http.ResponseWriter, r *http.Request) {
		var body DLQRequeueBody
		if !decodeJSON(w, r, s.maxBody, &body) {
			return
		}
		var problems []FieldProblem
		if body.To != "high" && body.To != "normal" && body.To != "low" {
			problems = append(problems, FieldProblem{Field: "to", Problem: fmt.Sprintf("must be high, normal or low, got %q", body.To)})
		}
		if body.Limit < 0 {
			problems = append(problems, FieldProblem{Field: "limit", Problem: fmt.Sprintf("must not be negative, got %d", body.Limit)})
		}
		if len(problems) > 0 {
			writeError(w, http.StatusBadRequest, "invalid_argument", "invalid requeue request", problems...)
			return
		}
		n, err := d.Requeue(r.Context(), body.To, body.Limit)
		if n > 0 {
			s.logger.InfoContext(r.Context(), "requeued dead-lettered messages", "to", broker.CommandQueue(body.To), "messages", n, "actor", actor(r))
		}
		if err != nil {
			s.writeBrokerError(w, r, fmt.Sprintf("requeueing from %s (%d moved before the failure)", broker.DeadLetterQ, n), err)
			return
		}
		writeJSON(w, http.StatusOK, DLQRequeueResult{Requeued: n, To: body.To, Queue: broker.CommandQueue(body.To)})
	})
}

// purgeDLQ answers POST /api/v1/dlq/purge {"confirm": true}.
func (s *server) purgeDLQ(d DLQ) http.HandlerFunc {
	return withDLQ(d, func(w http.ResponseWriter, r *http.Request) {
		var body DLQPurgeBody
		if !decodeJSON(w, r, s.maxBody, &body) {
			return
		}
		if !body.Confirm {
			writeError(w, http.StatusBadRequest, "invalid_argument", "purging drops every dead-lettered message for good",
				FieldProblem{Field: "confirm", Problem: "must be true"})
			return
		}
		n, err := d.Purge(r.Context())
		if err != nil {
			s.writeBrokerError(w, r, "purging "+broker.DeadLetterQ, err)
			return
		}
		s.logger.WarnContext(r.Context(), "purged the dead-letter queue", "queue", broker.DeadLetterQ, "messages", n, "actor", actor(r))
		writeJSON(w, http.StatusOK, DLQPurgeResult{Purged: n})
	})
}
