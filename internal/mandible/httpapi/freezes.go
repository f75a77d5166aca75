package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/schema"
)

func (s *server) createFreeze(w http.ResponseWriter, r *http.Request) {
	var body api.NewFreeze
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	f, err := schema.CreateFreeze(r.Context(), s.db, freezeDefinition(body), actor(r))
	var inputErr *domain.InputError
	switch {
	case errors.As(err, &inputErr):
		writeInputError(w, r, inputErr)
		return
	case errors.Is(err, schema.ErrFreezeExists):
		api.WriteError(w, r, http.StatusConflict, api.CodeAlreadyExists, fmt.Sprintf("a freeze named %q already exists; delete it first", body.Name))
		return
	case err != nil:
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "freeze created", "freeze", f.Name, "active", f.Active, "actor", actor(r))
	api.WriteJSON(w, http.StatusCreated, freezeOf(f))
}

func (s *server) listFreezes(w http.ResponseWriter, r *http.Request) {
	fs, err := schema.ListFreezes(r.Context(), s.db, time.Now())
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.FreezeList{Freezes: mapped(fs, freezeOf)})
}

// getFreeze answers GET /api/v1/freezes/{name}: one freeze, with whether it holds now.
func (s *server) getFreeze(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, err := schema.GetFreeze(r.Context(), s.db, name, time.Now())
	if writeLookupError(w, r, s.logger, err, fmt.Sprintf("no freeze named %.130q", name)) {
		return
	}
	api.WriteJSON(w, http.StatusOK, freezeOf(f))
}

func (s *server) deleteFreeze(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := schema.DeleteFreeze(r.Context(), s.db, name)
	if writeLookupError(w, r, s.logger, err, fmt.Sprintf("no freeze named %.130q", name)) {
		return
	}
	s.logger.InfoContext(r.Context(), "freeze deleted", "freeze", name, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}

// freezeGate decides whether d may be created despite the freezes active now. It
// answers the refusal itself and returns ok = false: 409 naming each freeze and its
// reason, or 403 for an override asked without an admin token. When an admin
// overrides, it returns the freezes overridden, for the caller to record.
func (s *server) freezeGate(w http.ResponseWriter, r *http.Request, d spec.Deployment) (overridden []schema.BlockingFreeze, ok bool) {
	override, ok := s.overrideAsked(w, r)
	if !ok {
		return nil, false
	}
	blocking, err := s.blockingFreezes(r, d)
	return s.decideFreeze(w, r, "deployment", override, blocking, err)
}

// targetsFreezeGate is freezeGate for commands on named targets (raw dispatch
// requests): a freeze holds whatever the entry point, with the same override.
func (s *server) targetsFreezeGate(w http.ResponseWriter, r *http.Request, targets []string) (overridden []schema.BlockingFreeze, ok bool) {
	override, ok := s.overrideAsked(w, r)
	if !ok {
		return nil, false
	}
	blocking, err := schema.BlockingFreezes(r.Context(), s.db, targets, time.Now())
	return s.decideFreeze(w, r, "dispatch requests", override, blocking, err)
}

// overrideAsked reads override_freeze, answering 400 for a bad value and 403 when
// the token asking is not an admin's.
func (s *server) overrideAsked(w http.ResponseWriter, r *http.Request) (override, ok bool) {
	override, ok = boolQuery(w, r, api.QueryOverrideFreeze)
	if !ok || !override {
		return false, ok
	}
	if t, _ := TokenFrom(r.Context()); !t.Scope.Covers(apitoken.ScopeAdmin) {
		api.WriteError(w, r, http.StatusForbidden, api.CodeForbidden,
			fmt.Sprintf("%s=true needs scope admin; token %q holds scope %s", api.QueryOverrideFreeze, t.Name, t.Scope))
		return false, false
	}
	return true, true
}

// decideFreeze answers what, blocked by blocking (or err reading them), with 409
// unless an admin overrides; it returns the freezes overridden.
func (s *server) decideFreeze(w http.ResponseWriter, r *http.Request, what string, override bool, blocking []schema.BlockingFreeze, err error) ([]schema.BlockingFreeze, bool) {
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return nil, false
	}
	if len(blocking) == 0 {
		return nil, true
	}
	if override {
		return blocking, true
	}
	writeFrozen(w, r, what, blocking)
	return nil, false
}

// blockingFreezes returns the freezes active now that match some of d's targets.
func (s *server) blockingFreezes(r *http.Request, d spec.Deployment) ([]schema.BlockingFreeze, error) {
	targets, err := schema.ResolveTargets(r.Context(), s.db, d.Targets, d.TargetSelector)
	if err != nil {
		return nil, err
	}
	return schema.BlockingFreezes(r.Context(), s.db, targets, time.Now())
}

// writeFrozen answers 409 naming every blocking freeze and its reason, one field
// entry per freeze ("freezes.<name>").
func writeFrozen(w http.ResponseWriter, r *http.Request, what string, blocking []schema.BlockingFreeze) {
	names := make([]string, len(blocking))
	fields := make([]api.FieldProblem, len(blocking))
	for i, f := range blocking {
		names[i] = fmt.Sprintf("%q (%s; %d targets, e.g. %s)", f.Name, f.Reason, f.Targets, f.FirstTarget)
		fields[i] = api.FieldProblem{Field: "freezes." + f.Name, Problem: f.Reason}
	}
	api.WriteError(w, r, http.StatusConflict, api.CodeFrozen,
		fmt.Sprintf("%s refused by active freeze %s; an admin token may pass %s=true", what, strings.Join(names, ", "), api.QueryOverrideFreeze),
		fields...)
}

// recordOverride records who overrode which freezes on a new deployment.
func (s *server) recordOverride(r *http.Request, d spec.Deployment, overridden []schema.BlockingFreeze) error {
	if len(overridden) == 0 {
		return nil
	}
	id, err := uuid.Parse(d.DeploymentID)
	if err != nil {
		return err
	}
	if err := schema.RecordFreezeOverride(r.Context(), s.db, id, actor(r), overridden); err != nil {
		return err
	}
	for _, f := range overridden {
		s.logger.WarnContext(r.Context(), "freeze overridden", "deployment_id", id, "freeze", f.Name, "actor", actor(r))
	}
	return nil
}

// boolQuery reads an optional true/false query parameter, answering 400 for any
// other value.
func boolQuery(w http.ResponseWriter, r *http.Request, name string) (bool, bool) {
	switch v := r.URL.Query().Get(name); v {
	case "", "false":
		return false, true
	case "true":
		return true, true
	default:
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "bad "+name,
			api.FieldProblem{Field: name, Problem: fmt.Sprintf("must be true or false, got %.20q", v)})
		return false, false
	}
}
