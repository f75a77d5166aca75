package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

func (s *server) registerTarget(w http.ResponseWriter, r *http.Request) {
	var body api.NewTarget
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	t, err := schema.RegisterTarget(r.Context(), s.db, schema.NewTarget{Name: body.Name, Mode: body.Mode, Address: body.Address, Labels: body.Labels}, s.heartbeatTimeout)
	var inputErr *domain.InputError
	if errors.As(err, &inputErr) {
		writeInputError(w, r, inputErr)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "target registered", "target", t.Name, "mode", t.Mode, "actor", actor(r))
	api.WriteJSON(w, http.StatusOK, targetOf(t))
}

// listTargets answers GET /api/v1/targets?selector=&limit=&after=: a page of the
// registered targets by name, those whose labels hold every key=value of selector.
func (s *server) listTargets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var problems domain.Problems
	f := schema.TargetFilter{Selector: selectorParam(q, &problems), After: afterParam(q, &problems),
		Limit: limitParam(q, &problems, schema.MaxTargetsListed)}
	if len(problems) > 0 {
		writeInputError(w, r, &domain.InputError{Problems: problems})
		return
	}
	ts, err := schema.ListTargets(r.Context(), s.db, f)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	resp := api.TargetList{Targets: nonNil(mapped(ts, targetOf))}
	if len(ts) > 0 && len(ts) == pageSize(f.Limit, schema.DefaultTargetsListed) {
		resp.Next = "/api/v1/targets?" + withParam(q, "after", ts[len(ts)-1].Name)
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// getTarget answers GET /api/v1/targets/{name}: one registered target.
func (s *server) getTarget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	t, err := schema.GetTarget(r.Context(), s.db, name)
	if writeLookupError(w, r, s.logger, err, fmt.Sprintf("no registered target named %.130q", name)) {
		return
	}
	api.WriteJSON(w, http.StatusOK, targetOf(t))
}

func (s *server) deregisterTarget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := schema.DeregisterTarget(r.Context(), s.db, name)
	if writeLookupError(w, r, s.logger, err, "no registered target named "+name) {
		return
	}
	s.logger.InfoContext(r.Context(), "target deregistered", "target", name, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}
