package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/spec"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// MemoCreatedBy is the key of a deployment workflow's memo that names the API token
// that created it, so that the Temporal Web UI shows who started each deployment.
const MemoCreatedBy = "created_by"

// createdDeployment is the answer to POST /api/v1/deployments.
type createdDeployment struct {
	ID      uuid.UUID         `json:"id"`
	Status  string            `json:"status"`
	Created bool              `json:"created"`
	Links   map[string]string `json:"links"`
}

func (s *server) links(id uuid.UUID) map[string]string {
	l := map[string]string{
		"self":   "/api/v1/deployments/" + id.String(),
		"cancel": "/api/v1/deployments/" + id.String() + "/cancel",
		"events": "/sse/deployments/" + id.String(),
	}
	if s.temporalUI != "" {
		l["temporal"] = fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(s.temporalUI, "/"),
			url.PathEscape(s.namespace), url.PathEscape(workflows.DeploymentWorkflowID(id.String())))
	}
	return l
}

func (s *server) createDeployment(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body exceeds %d bytes", s.maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_body", err.Error())
		return
	}
	d, err := spec.Parse(body)
	if err != nil {
		writeSpecError(w, err)
		return
	}
	d = d.WithDefaults()
	if problems := s.secretProblems(d); len(problems) > 0 {
		writeError(w, http.StatusBadRequest, "invalid_spec", "invalid deployment spec: env_secret", problems...)
		return
	}
	// Unknown targets are the caller's mistake: say so now, not in the workflow.
	if _, err := schema.ResolveTargets(r.Context(), s.db, d.Targets, d.TargetSelector); err != nil {
		var inputErr *schema.InputError
		if errors.As(err, &inputErr) {
			writeInputError(w, inputErr)
			return
		}
		writeServerError(w, r, s.logger, err)
		return
	}
	// Secrets are sealed before anything is stored or started: the row and the
	// workflow's input (its history, whether or not the codec is on) hold them sealed.
	newID := uuid.Must(uuid.NewV7())
	sealed, ok := s.sealSpec(w, r, d, newID)
	if !ok {
		return
	}
	stored, err := json.Marshal(sealed) // YAML or JSON in, JSON stored
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	id, created, err := schema.CreateDeployment(r.Context(), s.db, schema.NewDeployment{
		ID: newID, Name: d.Name, Priority: d.Priority, Spec: stored, IdempotencyKey: d.IdempotencyKey, MaxParallel: d.MaxParallel,
		CreatedBy: actor(r),
	})
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	if id != newID { // an idempotent create: seal for the deployment that exists
		if sealed, ok = s.sealSpec(w, r, d, id); !ok {
			return
		}
	}
	d = sealed
	d.DeploymentID = id.String()
	// Started on every create, the idempotent ones too: a create that stopped between
	// the row and the workflow is completed by its retry.
	_, err = s.temporal.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:                       workflows.DeploymentWorkflowID(id.String()),
		TaskQueue:                s.deploymentQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            fmt.Sprintf("Deployment %s (%s priority)", d.Name, d.Priority),
		Memo:                     map[string]any{MemoCreatedBy: actor(r)},
	}, workflows.DeploymentWorkflowType, d)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) {
		writeServerError(w, r, s.logger, fmt.Errorf("starting deployment workflow: %w", err))
		return
	}
	view, err := schema.GetDeployment(r.Context(), s.db, id)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	if created {
		s.logger.InfoContext(r.Context(), "deployment created", "deployment_id", id, "actor", actor(r))
	}
	code := http.StatusAccepted
	if !created {
		code = http.StatusOK
	}
	writeJSON(w, code, createdDeployment{ID: id, Status: view.Status, Created: created, Links: s.links(id)})
}

func writeSpecError(w http.ResponseWriter, err error) {
	var errs spec.Errors
	if errors.As(err, &errs) {
		fields := make([]FieldProblem, len(errs))
		for i, e := range errs {
			fields[i] = FieldProblem{Field: e.Field, Problem: e.Problem}
		}
		writeError(w, http.StatusBadRequest, "invalid_spec", err.Error(), fields...)
		return
	}
	writeError(w, http.StatusBadRequest, "invalid_spec", err.Error())
}

func (s *server) deploymentID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", "id must be a UUID", FieldProblem{Field: "id", Problem: "must be a UUID"})
		return uuid.Nil, false
	}
	return id, true
}

func (s *server) getDeployment(w http.ResponseWriter, r *http.Request) {
	id, ok := s.deploymentID(w, r)
	if !ok {
		return
	}
	d, err := schema.GetDeployment(r.Context(), s.db, id)
	if errors.Is(err, schema.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no deployment "+id.String())
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	d.Spec = redactSpec(d.Spec)
	writeJSON(w, http.StatusOK, map[string]any{"deployment": d, "links": s.links(id)})
}

func (s *server) listDeployments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := schema.DeploymentFilter{Name: q.Get("name")}
	var problems []string
	if v := q.Get("status"); v != "" {
		for _, st := range strings.Split(v, ",") {
			switch st {
			case schema.DeploymentPending, schema.DeploymentRunning, schema.DeploymentSucceeded, schema.DeploymentFailed, schema.DeploymentCancelled:
				f.Statuses = append(f.Statuses, st)
			default:
				problems = append(problems, "status: must be pending, running, succeeded, failed or cancelled, got "+strconv.Quote(st))
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			problems = append(problems, "limit: must be 1-500, got "+strconv.Quote(v))
		}
		f.Limit = n
	}
	if v := q.Get("before"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			problems = append(problems, "before: must be a UUID, got "+strconv.Quote(v))
		} else {
			f.Before = &id
		}
	}
	if len(problems) > 0 {
		writeInputError(w, &schema.InputError{Problems: problems})
		return
	}
	ds, err := schema.ListDeployments(r.Context(), s.db, f)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	resp := map[string]any{"deployments": ds}
	limit := f.Limit
	if limit == 0 {
		limit = 50
	}
	if len(ds) == limit {
		resp["next"] = "/api/v1/deployments?" + withBefore(q, ds[len(ds)-1].ID)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *server) cancelDeployment(w http.ResponseWriter, r *http.Request) {
	id, ok := s.deploymentID(w, r)
	if !ok {
		return
	}
	d, err := schema.GetDeployment(r.Context(), s.db, id)
	if errors.Is(err, schema.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no deployment "+id.String())
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	if d.Status != schema.DeploymentPending && d.Status != schema.DeploymentRunning {
		writeError(w, http.StatusConflict, "already_finished", "deployment "+id.String()+" already ended "+d.Status)
		return
	}
	if err := s.temporal.CancelWorkflow(r.Context(), workflows.DeploymentWorkflowID(id.String()), ""); err != nil {
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			writeServerError(w, r, s.logger, fmt.Errorf("cancelling deployment workflow: %w", err))
			return
		}
	}
	if err := schema.RecordCancelRequest(r.Context(), s.db, id, actor(r)); err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "deployment cancel requested", "deployment_id", id, "actor", actor(r))
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "status": "cancelling", "links": s.links(id)})
}
