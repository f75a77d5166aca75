package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/secretenv"
	"github.com/mantis-deploy/mantis/schema"
)

// Resume and re-run make a new deployment from one that ended: a resume runs the
// steps from a step on, on the targets that step failed on (or on every target the
// deployment had), and a re-run runs the same spec again, its target_selector
// resolved anew. Both go through the create path (validation, freezes, limits,
// idempotency) and link the new deployment to the old one: the row, the old
// deployment's event stream and the new workflow's memo.

// Keys of the memo of a resumed or re-run deployment's workflow, shown by the
// Temporal Web UI.
const (
	MemoPreviousDeployment = "previous_deployment"
	MemoRelation           = "relation"
	MemoFromStep           = "from_step"
)

// resumableStatuses are the statuses a deployment may be resumed from.
var resumableStatuses = []string{domain.DeploymentFailed, domain.DeploymentCancelled}

// relationRoutes are the routes of resume and re-run, with the create's scope.
func (s *server) relationRoutes() []apiRoute {
	if s.temporal == nil {
		return nil
	}
	return []apiRoute{
		{"POST /api/v1/deployments/{id}/resume", apitoken.ScopeDeploy, s.resumeDeployment},
		{"POST /api/v1/deployments/{id}/rerun", apitoken.ScopeDeploy, s.rerunDeployment},
	}
}

// resumeDeployment serves POST /api/v1/deployments/{id}/resume.
func (s *server) resumeDeployment(w http.ResponseWriter, r *http.Request) {
	id, src, ok := s.readSource(w, r)
	if !ok {
		return
	}
	req, ok := readResumeRequest(w, r)
	if !ok {
		return
	}
	if !slices.Contains(resumableStatuses, src.Status) {
		api.WriteError(w, r, http.StatusConflict, api.CodeInvalidState,
			fmt.Sprintf("deployment %s is %s; only a deployment that failed or was cancelled can be resumed (rerun runs any that ended again)", id, src.Status))
		return
	}
	old, ok := s.openStoredSpec(w, r, id, src.Spec)
	if !ok {
		return
	}
	from, ok := resumeFromStep(w, r, id, src, old, req.FromStep)
	if !ok {
		return
	}
	failedOnly := req.FailedOnly == nil || *req.FailedOnly
	targets, leftOut, ok := s.resumeTargets(w, r, id, from, old.Steps[from].Name, failedOnly)
	if !ok {
		return
	}
	d := old
	d.Steps = old.Steps[from:]
	d.Targets, d.TargetSelector = targets, nil
	link := schema.DeploymentLink{Previous: id, Relation: schema.RelationResume, FromStep: &from, Actor: actor(r)}
	created, code, ok := s.createRelated(w, r, d, link)
	if !ok {
		return
	}
	s.logger.InfoContext(r.Context(), "deployment resumed", "deployment_id", created.ID, "previous_deployment_id", id,
		"from_step", from, "targets", len(targets), "left_out", len(leftOut), "actor", actor(r))
	answer := api.Related(created, api.RelationResume, id)
	answer.FromStep, answer.Targets, answer.LeftOut = &from, targets, leftOut
	api.WriteJSON(w, code, answer)
}

// rerunDeployment serves POST /api/v1/deployments/{id}/rerun.
func (s *server) rerunDeployment(w http.ResponseWriter, r *http.Request) {
	id, src, ok := s.readSource(w, r)
	if !ok {
		return
	}
	if src.Status == domain.DeploymentPending || src.Status == domain.DeploymentRunning {
		api.WriteError(w, r, http.StatusConflict, api.CodeInvalidState,
			fmt.Sprintf("deployment %s is %s; it can be run again once it has ended", id, src.Status))
		return
	}
	d, ok := s.openStoredSpec(w, r, id, src.Spec)
	if !ok {
		return
	}
	link := schema.DeploymentLink{Previous: id, Relation: schema.RelationRerun, Actor: actor(r)}
	created, code, ok := s.createRelated(w, r, d, link)
	if !ok {
		return
	}
	s.logger.InfoContext(r.Context(), "deployment run again", "deployment_id", created.ID, "previous_deployment_id", id, "actor", actor(r))
	api.WriteJSON(w, code, api.Related(created, api.RelationRerun, id))
}

// readSource reads the deployment the path's {id} names, answering 400 or 404
// itself.
func (s *server) readSource(w http.ResponseWriter, r *http.Request) (uuid.UUID, schema.DeploymentSource, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "id must be a UUID", api.FieldProblem{Field: "id", Problem: "must be a UUID"})
		return uuid.Nil, schema.DeploymentSource{}, false
	}
	src, err := schema.DeploymentSourceOf(r.Context(), s.db, id)
	if errors.Is(err, schema.ErrNotFound) {
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no deployment "+id.String())
		return uuid.Nil, schema.DeploymentSource{}, false
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return uuid.Nil, schema.DeploymentSource{}, false
	}
	return id, src, true
}

// readResumeRequest reads the optional body of a resume, answering 400 or 413
// itself.
func readResumeRequest(w http.ResponseWriter, r *http.Request) (api.ResumeRequest, bool) {
	var req api.ResumeRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxResumeBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.WriteError(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("request body exceeds %d bytes", api.MaxResumeBody))
			return req, false
		}
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidBody, err.Error())
		return req, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		detail := "the body must be one JSON object with from_step and failed_only, both optional"
		if err != nil {
			detail += ": " + err.Error()
		}
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidJSON, detail)
		return req, false
	}
	return req, true
}

// openStoredSpec reads deployment id's stored spec with its secrets opened, ready to
// be created again: without the idempotency key and the id the old one had.
func (s *server) openStoredSpec(w http.ResponseWriter, r *http.Request, id uuid.UUID, stored json.RawMessage) (spec.Deployment, bool) {
	var d spec.Deployment
	if err := json.Unmarshal(stored, &d); err != nil {
		writeServerError(w, r, s.logger, fmt.Errorf("reading the stored spec of deployment %s: %w", id, err))
		return d, false
	}
	for i, st := range d.Steps {
		opened := make(map[string]string, len(st.EnvSecret))
		for name, v := range st.EnvSecret {
			plain, err := secretenv.Open(s.secrets, id.String(), name, v)
			if err != nil {
				api.WriteError(w, r, http.StatusConflict, api.CodeInvalidState,
					fmt.Sprintf("the secret env of deployment %s cannot be opened (%v); create it again from its spec", id, err),
					api.FieldProblem{Field: fmt.Sprintf("steps[%d].env_secret.%s", i, name), Problem: "cannot be opened"})
				return d, false
			}
			opened[name] = plain
		}
		if len(opened) > 0 {
			d.Steps[i].EnvSecret = opened
		}
	}
	d.IdempotencyKey, d.DeploymentID = "", ""
	return d, true
}

// resumeFromStep checks the step a resume starts from, or finds it: the first step
// that did not succeed. It answers 400 itself.
func resumeFromStep(w http.ResponseWriter, r *http.Request, id uuid.UUID, src schema.DeploymentSource, d spec.Deployment, asked *int) (int, bool) {
	if asked != nil {
		if *asked < 0 || *asked >= len(d.Steps) {
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument,
				fmt.Sprintf("from_step %d is out of range: deployment %s has steps 0 to %d", *asked, id, len(d.Steps)-1),
				api.FieldProblem{Field: "from_step", Problem: fmt.Sprintf("must be between 0 and %d", len(d.Steps)-1)})
			return 0, false
		}
		return *asked, true
	}
	for i := range d.Steps {
		if i >= len(src.Steps) || src.Steps[i] != domain.StepSucceeded {
			return i, true
		}
	}
	api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument,
		fmt.Sprintf("every step of deployment %s succeeded: name a from_step to resume from", id),
		api.FieldProblem{Field: "from_step", Problem: "required: every step succeeded"})
	return 0, false
}

// resumeTargets names the targets a resume from step from runs on, those left out
// because they are no longer registered, and answers 400 itself when none is left.
func (s *server) resumeTargets(w http.ResponseWriter, r *http.Request, id uuid.UUID, from int, stepName string, failedOnly bool) ([]string, []string, bool) {
	var (
		found []schema.RelatedTarget
		err   error
	)
	if failedOnly {
		found, err = schema.FailedTargetsOfStepAll(r.Context(), s.db, id, from, spec.MaxTargets)
	} else {
		found, err = schema.RecordedTargets(r.Context(), s.db, id, spec.MaxTargets)
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return nil, nil, false
	}
	var targets, leftOut []string
	for _, t := range found {
		if t.Registered {
			targets = append(targets, t.Name)
		} else {
			leftOut = append(leftOut, t.Name)
		}
	}
	switch {
	case len(found) == 0 && failedOnly:
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument,
			fmt.Sprintf("step %d (%s) of deployment %s failed on no target: set failed_only to false to run it on every target, or name another from_step", from, stepName, id),
			api.FieldProblem{Field: "failed_only", Problem: fmt.Sprintf("step %d has no failed targets", from)})
		return nil, nil, false
	case len(found) == 0:
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument,
			fmt.Sprintf("deployment %s recorded no targets (it ended before it started): rerun it instead", id))
		return nil, nil, false
	case len(targets) == 0:
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument,
			fmt.Sprintf("no target to resume deployment %s on: %s no longer registered", id, strings.Join(leftOut, ", ")),
			api.FieldProblem{Field: "targets", Problem: "none is registered any more"})
		return nil, nil, false
	}
	return targets, leftOut, true
}

// createRelated creates d, made from another deployment as link says, through the
// checks of a create: the spec's validation with the request's Idempotency-Key, its
// secrets, its targets, then create's gates.
func (s *server) createRelated(w http.ResponseWriter, r *http.Request, d spec.Deployment, link schema.DeploymentLink) (api.CreatedDeployment, int, bool) {
	if err := d.Validate(); err != nil {
		writeSpecError(w, r, err)
		return api.CreatedDeployment{}, 0, false
	}
	d, ok := withIdempotencyKey(w, r, d)
	if !ok {
		return api.CreatedDeployment{}, 0, false
	}
	d = d.WithDefaults()
	if problems := s.secretProblems(d); len(problems) > 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidSpec, "invalid deployment spec: env_secret", problems...)
		return api.CreatedDeployment{}, 0, false
	}
	if _, err := schema.ResolveTargets(r.Context(), s.db, d.Targets, d.TargetSelector); err != nil {
		var inputErr *domain.InputError
		if errors.As(err, &inputErr) {
			writeInputError(w, r, inputErr)
			return api.CreatedDeployment{}, 0, false
		}
		writeServerError(w, r, s.logger, err)
		return api.CreatedDeployment{}, 0, false
	}
	return s.create(w, r, d, &link)
}

// link links the new deployment id to the one it was made from, answering 409
// itself when the idempotency key named a deployment made otherwise.
func (s *server) link(w http.ResponseWriter, r *http.Request, id uuid.UUID, key string, link schema.DeploymentLink) bool {
	_, err := schema.LinkDeployment(r.Context(), s.db, id, link)
	if errors.Is(err, schema.ErrLinkConflict) {
		writeIdempotencyConflict(w, r, key, id)
		return false
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return false
	}
	return true
}

// linkMemo is the memo that shows a new deployment's link in the Temporal Web UI;
// nil for a deployment made from none.
func linkMemo(link *schema.DeploymentLink) map[string]any {
	if link == nil {
		return nil
	}
	m := map[string]any{MemoPreviousDeployment: link.Previous.String(), MemoRelation: link.Relation}
	if link.FromStep != nil {
		m[MemoFromStep] = *link.FromStep
	}
	return m
}
