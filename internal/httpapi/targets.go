package httpapi

import (
	"errors"
	"net/http"

	"github.com/mantis-deploy/mantis/schema"
)

// targetBody is the body of POST /api/v1/targets.
type targetBody struct {
	Name    string            `json:"name"`
	Mode    string            `json:"mode"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels"`
}

func (s *server) registerTarget(w http.ResponseWriter, r *http.Request) {
	var body targetBody
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	t, err := schema.RegisterTarget(r.Context(), s.db, schema.NewTarget(body), s.heartbeatTimeout)
	var inputErr *schema.InputError
	if errors.As(err, &inputErr) {
		writeInputError(w, inputErr)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "target registered", "target", t.Name, "mode", t.Mode, "actor", actor(r))
	writeJSON(w, http.StatusOK, t)
}

func (s *server) listTargets(w http.ResponseWriter, r *http.Request) {
	ts, err := schema.ListTargets(r.Context(), s.db)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	if ts == nil {
		ts = []schema.Target{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"targets": ts})
}

func (s *server) deregisterTarget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := schema.DeregisterTarget(r.Context(), s.db, name)
	if errors.Is(err, schema.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no registered target named "+name)
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "target deregistered", "target", name, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}
