package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
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

// withDLQ answers 503 when Mandible runs without a broker.
func withDLQ(d DLQ, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d == nil {
			api.WriteError(w, r, http.StatusServiceUnavailable, api.CodeUnavailable,
				"this Mandible runs without a broker ([queue] enabled = false): there is no dead-letter queue")
			return
		}
		h(w, r)
	}
}

// writeBrokerError answers 502 for a broker that failed the operation.
func (s *server) writeBrokerError(w http.ResponseWriter, r *http.Request, op string, err error) {
	s.logger.WarnContext(r.Context(), "dlq operation failed", "op", op, "err", err)
	api.WriteError(w, r, http.StatusBadGateway, api.CodeBrokerError, fmt.Sprintf("%s: %v", op, err))
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
				api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "bad limit",
					api.FieldProblem{Field: "limit", Problem: fmt.Sprintf("must be 0-%d, got %q", maxDLQList, v)})
				return
			}
			limit = n
		}
		listing, err := d.List(r.Context(), limit)
		if err != nil {
			s.writeBrokerError(w, r, "listing "+broker.DeadLetterQ, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, listing)
	})
}

// requeueDLQ answers POST /api/v1/dlq/requeue {"to": "high|normal|low", "limit": N}.
func (s *server) requeueDLQ(d DLQ) http.HandlerFunc {
	return withDLQ(d, func(w http.ResponseWriter, r *http.Request) {
		var body api.DLQRequeueBody
		if !decodeJSON(w, r, s.maxBody, &body) {
			return
		}
		var problems []api.FieldProblem
		if !domain.ValidPriority(body.To) {
			problems = append(problems, api.FieldProblem{Field: "to", Problem: fmt.Sprintf("must be high, normal or low, got %q", body.To)})
		}
		if body.Limit < 0 {
			problems = append(problems, api.FieldProblem{Field: "limit", Problem: fmt.Sprintf("must not be negative, got %d", body.Limit)})
		}
		if len(problems) > 0 {
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "invalid requeue request", problems...)
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
		api.WriteJSON(w, http.StatusOK, api.DLQRequeueResult{Requeued: n, To: body.To, Queue: broker.CommandQueue(body.To)})
	})
}

// purgeDLQ answers POST /api/v1/dlq/purge {"confirm": true}.
func (s *server) purgeDLQ(d DLQ) http.HandlerFunc {
	return withDLQ(d, func(w http.ResponseWriter, r *http.Request) {
		var body api.DLQPurgeBody
		if !decodeJSON(w, r, s.maxBody, &body) {
			return
		}
		if !body.Confirm {
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "purging drops every dead-lettered message for good",
				api.FieldProblem{Field: "confirm", Problem: "must be true"})
			return
		}
		n, err := d.Purge(r.Context())
		if err != nil {
			s.writeBrokerError(w, r, "purging "+broker.DeadLetterQ, err)
			return
		}
		s.logger.WarnContext(r.Context(), "purged the dead-letter queue", "queue", broker.DeadLetterQ, "messages", n, "actor", actor(r))
		api.WriteJSON(w, http.StatusOK, api.DLQPurgeResult{Purged: n})
	})
}
