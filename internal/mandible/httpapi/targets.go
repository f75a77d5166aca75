package httpapi

import (
	"errors"
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

func (s *server) listTargets(w http.ResponseWriter, r *http.Request) {
	ts, err := schema.ListTargets(r.Context(), s.db)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.TargetList{Targets: nonNil(mapped(ts, targetOf))})
}

func (s *server) deregisterTarget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := schema.DeregisterTarget(r.Context(), s.db, name)
	if errors.Is(err, schema.ErrNotFound) {
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no registered target named "+name)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "target deregistered", "target", name, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}
