package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// Page sizes of GET /api/v1/dispatch-requests.
const (
	defaultDispatchPage = 100
	maxDispatchPage     = 1000
)

// listableDispatchStatuses are the states ?status= may ask for.
var listableDispatchStatuses = []string{domain.StatusPending, domain.StatusProcessing, domain.StatusDispatched, domain.StatusFailed, domain.StatusExpired}

func (s *server) enqueueDispatchRequests(w http.ResponseWriter, r *http.Request) {
	var body api.EnqueueBody
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	if len(body.Requests) == 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "no requests", api.FieldProblem{Field: "requests", Problem: "must hold at least one request"})
		return
	}
	reqs := make([]schema.NewDispatchRequest, len(body.Requests))
	var problems domain.Problems
	for i, b := range body.Requests {
		var timeout time.Duration
		if b.Timeout != "" {
			d, err := time.ParseDuration(b.Timeout)
			switch {
			case err != nil || d <= 0:
				problems.Add("requests["+strconv.Itoa(i)+"].timeout", "must be a positive duration like \"90s\", got "+strconv.Quote(b.Timeout))
			case d > spec.MaxStepTimeout:
				// A step's bound holds for a raw request too: past it a holder's
				// deadline arithmetic overflows, and nothing legitimate runs longer.
				problems.Add("requests["+strconv.Itoa(i)+"].timeout", "must be at most "+spec.MaxStepTimeout.String()+", got "+strconv.Quote(b.Timeout))
			}
			timeout = d
		}
		priority := b.Priority
		if priority == "" {
			priority = domain.PriorityNormal
		}
		reqs[i] = schema.NewDispatchRequest{IdempotencyKey: b.IdempotencyKey, Target: b.Target, Command: b.Command, Priority: priority, Timeout: timeout}
	}
	if len(problems) > 0 {
		writeInputError(w, r, &domain.InputError{Problems: problems})
		return
	}
	overridden, ok := s.targetsFreezeGate(w, r, requestTargets(reqs))
	if !ok {
		return
	}
	out, err := schema.EnqueueDispatchRequests(r.Context(), s.db, reqs)
	var inputErr *domain.InputError
	if errors.As(err, &inputErr) {
		writeInputError(w, r, inputErr)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	for _, f := range overridden {
		s.logger.WarnContext(r.Context(), "freeze overridden for dispatch requests", "freeze", f.Name, "requests", len(out), "actor", actor(r))
	}
	s.logger.InfoContext(r.Context(), "dispatch requests enqueued", "requests", len(out), "actor", actor(r))
	api.WriteJSON(w, http.StatusAccepted, enqueueAnswerOf(out))
}

func (s *server) listDispatchRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := schema.DispatchRequestFilter{Target: q.Get("target")}
	var problems domain.Problems
	f.Statuses = statusesParam(q, &problems, listableDispatchStatuses)
	f.Limit = limitParam(q, &problems, maxDispatchPage)
	f.DeploymentID = uuidParam(q, &problems, "deployment")
	f.Before = uuidParam(q, &problems, "before")
	if len(problems) > 0 {
		writeInputError(w, r, &domain.InputError{Problems: problems})
		return
	}
	views, err := schema.ListDispatchRequests(r.Context(), s.db, f, s.heartbeatTimeout)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	resp := api.DispatchRequestList{Requests: nonNil(mapped(views, dispatchRequestOf))}
	if len(views) == pageSize(f.Limit, defaultDispatchPage) {
		resp.Next = "/api/v1/dispatch-requests?" + withBefore(q, views[len(views)-1].ID)
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// requestTargets returns the targets named by reqs, each once.
func requestTargets(reqs []schema.NewDispatchRequest) []string {
	seen := make(map[string]bool, len(reqs))
	var out []string
	for _, r := range reqs {
		if !seen[r.Target] {
			seen[r.Target] = true
			out = append(out, r.Target)
		}
	}
	return out
}
