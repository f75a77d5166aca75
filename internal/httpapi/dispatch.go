package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/schema"
)

// dispatchRequestBody is one request in POST /api/v1/dispatch-requests.
type dispatchRequestBody struct {
	IdempotencyKey string `json:"idempotency_key"`
	Target         string `json:"target"`
	Command        string `json:"command"`
	Priority       string `json:"priority"`
	// Timeout is a Go duration ("90s"); empty means ten minutes.
	Timeout string `json:"timeout"`
}

// enqueueBody is the body of POST /api/v1/dispatch-requests: many requests at once.
type enqueueBody struct {
	Requests []dispatchRequestBody `json:"requests"`
}

func (s *server) enqueueDispatchRequests(w http.ResponseWriter, r *http.Request) {
	var body enqueueBody
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	if len(body.Requests) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_argument", "no requests", FieldProblem{Field: "requests", Problem: "must hold at least one request"})
		return
	}
	reqs := make([]schema.NewDispatchRequest, len(body.Requests))
	var problems []string
	for i, b := range body.Requests {
		var timeout time.Duration
		if b.Timeout != "" {
			d, err := time.ParseDuration(b.Timeout)
			if err != nil || d <= 0 {
				problems = append(problems, "requests["+strconv.Itoa(i)+"].timeout: must be a positive duration like \"90s\", got "+strconv.Quote(b.Timeout))
			}
			timeout = d
		}
		priority := b.Priority
		if priority == "" {
			priority = schema.PriorityNormal
		}
		reqs[i] = schema.NewDispatchRequest{IdempotencyKey: b.IdempotencyKey, Target: b.Target, Command: b.Command, Priority: priority, Timeout: timeout}
	}
	if len(problems) > 0 {
		writeInputError(w, &schema.InputError{Problems: problems})
		return
	}
	out, err := schema.EnqueueDispatchRequests(r.Context(), s.db, reqs)
	var inputErr *schema.InputError
	if errors.As(err, &inputErr) {
		writeInputError(w, inputErr)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "dispatch requests enqueued", "requests", len(out), "actor", actor(r))
	writeJSON(w, http.StatusAccepted, map[string]any{"requests": out})
}

func (s *server) listDispatchRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := schema.DispatchRequestFilter{Target: q.Get("target")}
	var problems []string
	if v := q.Get("status"); v != "" {
		for _, st := range strings.Split(v, ",") {
			switch st {
			case schema.StatusPending, schema.StatusProcessing, schema.StatusDispatched, schema.StatusFailed, schema.StatusExpired:
				f.Statuses = append(f.Statuses, st)
			default:
				problems = append(problems, "status: must be pending, processing, dispatched, failed or expired, got "+strconv.Quote(st))
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			problems = append(problems, "limit: must be 1-1000, got "+strconv.Quote(v))
		}
		f.Limit = n
	}
	for _, p := range []struct {
		key string
		dst **uuid.UUID
	}{{"deployment", &f.DeploymentID}, {"before", &f.Before}} {
		if v := q.Get(p.key); v != "" {
			id, err := uuid.Parse(v)
			if err != nil {
				problems = append(problems, p.key+": must be a UUID, got "+strconv.Quote(v))
				continue
			}
			*p.dst = &id
		}
	}
	if len(problems) > 0 {
		writeInputError(w, &schema.InputError{Problems: problems})
		return
	}
	views, err := schema.ListDispatchRequests(r.Context(), s.db, f, s.heartbeatTimeout)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	if views == nil {
		views = []schema.DispatchRequestView{}
	}
	resp := map[string]any{"requests": views}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	if len(views) == limit {
		resp["next"] = "/api/v1/dispatch-requests?" + withBefore(q, views[len(views)-1].ID)
	}
	writeJSON(w, http.StatusOK, resp)
}

func withBefore(q url.Values, id uuid.UUID) string {
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("before", id.String())
	return next.Encode()
}
