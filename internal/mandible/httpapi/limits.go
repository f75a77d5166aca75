package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// maxLimitBody bounds the body of POST /api/v1/limits: a limit is a few short fields.
const maxLimitBody = 4 << 10

func (s *server) listLimits(w http.ResponseWriter, r *http.Request) {
	ls, err := schema.ListLimits(r.Context(), s.db)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.LimitList{Limits: nonNil(mapped(ls, limitOf))})
}

func (s *server) getLimit(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	l, err := schema.LimitByName(r.Context(), s.db, name)
	if errors.Is(err, schema.ErrNotFound) {
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no limit named "+name)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, limitOf(l))
}

func (s *server) setLimit(w http.ResponseWriter, r *http.Request) {
	var body api.Limit
	if !decodeJSON(w, r, min(s.maxBody, maxLimitBody), &body) {
		return
	}
	l, err := schema.SetLimit(r.Context(), s.db, newLimit(body), actor(r))
	var inputErr *domain.InputError
	switch {
	case errors.As(err, &inputErr):
		writeInputError(w, r, inputErr)
		return
	case errors.Is(err, schema.ErrLimitConflict):
		writeInputError(w, r, s.limitConflict(r.Context(), body))
		return
	case err != nil:
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "concurrency limit set", "limit", l.Name, "scope", l.Scope, "max_running", l.MaxRunning, "actor", actor(r))
	api.WriteJSON(w, http.StatusOK, limitOf(l))
}

// limitConflict says which limit already covers what body would cover, as a field
// problem.
func (s *server) limitConflict(ctx context.Context, body api.Limit) *domain.InputError {
	field, what := "value", "target "+body.Value
	switch {
	case body.Scope == domain.LimitScopeLabel:
		what = body.Label + "=" + body.Value
	case body.Value == "":
		field, what = "scope", "every target (the per-target default)"
	}
	ls, err := schema.ListLimits(ctx, s.db)
	if err == nil {
		for _, l := range ls {
			if l.Scope == body.Scope && l.Label == body.Label && l.Value == body.Value && l.Name != body.Name {
				return domain.Invalid(field, fmt.Sprintf("limit %s already covers %s; change that one or delete it first", l.Name, what))
			}
		}
	}
	return domain.Invalid(field, "another limit already covers "+what)
}

func (s *server) deleteLimit(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := schema.DeleteLimit(r.Context(), s.db, name)
	switch {
	case errors.Is(err, schema.ErrDefaultLimit):
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, err.Error(),
			api.FieldProblem{Field: "name", Problem: "the per-target default " + name + " may be changed (POST it) but not deleted"})
		return
	case errors.Is(err, schema.ErrNotFound):
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no limit named "+name)
		return
	case err != nil:
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "concurrency limit deleted", "limit", name, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}
