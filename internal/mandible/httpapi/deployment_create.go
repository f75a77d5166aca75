package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// MemoCreatedBy is the key of a deployment workflow's memo that names the API token
// that created it, so that the Temporal Web UI shows who started each deployment.
const MemoCreatedBy = "created_by"

// createDeployment stores a spec and starts its workflow. Every answer it writes
// itself; the steps are: read and check the spec, store it sealed, start the workflow.
func (s *server) createDeployment(w http.ResponseWriter, r *http.Request) {
	d, ok := s.readSpec(w, r)
	if !ok {
		return
	}
	if dryRun, ok := boolQuery(w, r, api.QueryDryRun); !ok || dryRun {
		if ok {
			s.writePlan(w, r, d)
		}
		return
	}
	created, code, ok := s.create(w, r, d, nil)
	if !ok {
		return
	}
	api.WriteJSON(w, code, created)
}

// create creates deployment d, made from another one when link is set, and starts
// its workflow: the gates of a create (freezes), the row
// with its secrets sealed, the idempotency check, the link, the workflow. It writes
// every refusal itself and returns the create answer and its status otherwise.
func (s *server) create(w http.ResponseWriter, r *http.Request, d spec.Deployment, link *schema.DeploymentLink) (api.CreatedDeployment, int, bool) {
	overridden, ok := s.freezeGate(w, r, d)
	if !ok {
		return api.CreatedDeployment{}, 0, false
	}
	// Secrets are sealed before anything is stored or started: the row and the
	// workflow's input (its history, whether or not the codec is on) hold them sealed.
	sealed, id, created, ok := s.storeDeployment(w, r, d)
	if !ok {
		return api.CreatedDeployment{}, 0, false
	}
	view, err := schema.GetDeployment(r.Context(), s.db, id)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return api.CreatedDeployment{}, 0, false
	}
	if !created {
		same, err := sameSpec(id, view.Spec, d)
		if err != nil {
			writeServerError(w, r, s.logger, err)
			return api.CreatedDeployment{}, 0, false
		}
		if !same {
			writeIdempotencyConflict(w, r, d.IdempotencyKey, id)
			return api.CreatedDeployment{}, 0, false
		}
	}
	if created {
		if err := s.recordOverride(r, sealed, overridden); err != nil {
			writeServerError(w, r, s.logger, err)
			return api.CreatedDeployment{}, 0, false
		}
	}
	if link != nil && !s.link(w, r, id, d.IdempotencyKey, *link) {
		return api.CreatedDeployment{}, 0, false
	}
	// Started on every create, the idempotent ones too: a create that stopped between
	// the row and the workflow is completed by its retry.
	if err := s.startDeploymentWorkflow(r, sealed, linkMemo(link)); err != nil {
		writeServerError(w, r, s.logger, err)
		return api.CreatedDeployment{}, 0, false
	}
	code := http.StatusOK
	if created {
		s.logger.InfoContext(r.Context(), "deployment created", "deployment_id", id, "actor", actor(r))
		code = http.StatusAccepted
	}
	return api.CreatedDeployment{ID: id, Status: view.Status, Created: created, Links: s.links(id), Warnings: secretWarnings(d)}, code, true
}

// readSpec reads the body as a spec, with its defaults, and checks what the spec
// alone cannot: its secrets and that its targets exist.
func (s *server) readSpec(w http.ResponseWriter, r *http.Request) (spec.Deployment, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.WriteError(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge, fmt.Sprintf("request body exceeds %d bytes", s.maxBody))
			return spec.Deployment{}, false
		}
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidBody, err.Error())
		return spec.Deployment{}, false
	}
	d, err := spec.Parse(body)
	if err != nil {
		writeSpecError(w, r, err)
		return spec.Deployment{}, false
	}
	d, ok := withIdempotencyKey(w, r, d)
	if !ok {
		return spec.Deployment{}, false
	}
	d = d.WithDefaults()
	if problems := s.secretProblems(d); len(problems) > 0 {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidSpec, "invalid deployment spec: env_secret", problems...)
		return spec.Deployment{}, false
	}
	// Unknown targets are the caller's mistake: say so now, not in the workflow.
	if _, err := schema.ResolveTargets(r.Context(), s.db, d.Targets, d.TargetSelector); err != nil {
		var inputErr *domain.InputError
		if errors.As(err, &inputErr) {
			writeInputError(w, r, inputErr)
			return spec.Deployment{}, false
		}
		writeServerError(w, r, s.logger, err)
		return spec.Deployment{}, false
	}
	return d, true
}

// storeDeployment stores d with its secrets sealed and returns the spec sealed for
// the deployment's id (an existing deployment's, for an idempotent create) with the
// id set, and whether the row is new.
func (s *server) storeDeployment(w http.ResponseWriter, r *http.Request, d spec.Deployment) (spec.Deployment, uuid.UUID, bool, bool) {
	newID := uuid.Must(uuid.NewV7())
	sealed, ok := s.sealSpec(w, r, d, newID)
	if !ok {
		return spec.Deployment{}, uuid.Nil, false, false
	}
	stored, err := json.Marshal(sealed) // YAML or JSON in, JSON stored
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return spec.Deployment{}, uuid.Nil, false, false
	}
	id, created, err := schema.CreateDeployment(r.Context(), s.db, schema.NewDeployment{
		ID: newID, Name: d.Name, Priority: d.Priority, Spec: stored, IdempotencyKey: d.IdempotencyKey, MaxParallel: d.MaxParallel,
		CreatedBy: actor(r),
	})
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return spec.Deployment{}, uuid.Nil, false, false
	}
	if id != newID { // an idempotent create: seal for the deployment that exists
		if sealed, ok = s.sealSpec(w, r, d, id); !ok {
			return spec.Deployment{}, uuid.Nil, false, false
		}
	}
	sealed.DeploymentID = id.String()
	return sealed, id, created, true
}

// startDeploymentWorkflow starts d's workflow, or finds it started; memo adds to
// its memo (a resumed or re-run deployment's link).
func (s *server) startDeploymentWorkflow(r *http.Request, d spec.Deployment, memo map[string]any) error {
	m := map[string]any{MemoCreatedBy: actor(r)}
	for k, v := range memo {
		m[k] = v
	}
	_, err := s.temporal.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:                       workflows.DeploymentWorkflowID(d.DeploymentID),
		TaskQueue:                s.deploymentQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            fmt.Sprintf("Deployment %s (%s priority)", d.Name, d.Priority),
		Memo:                     m,
	}, workflows.DeploymentWorkflowType, d)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) {
		return fmt.Errorf("starting deployment workflow: %w", err)
	}
	return nil
}

// writeSpecError answers 400 with one field entry per problem of the spec.
func writeSpecError(w http.ResponseWriter, r *http.Request, err error) {
	var errs spec.Errors
	if errors.As(err, &errs) {
		fields := make([]api.FieldProblem, len(errs))
		for i, e := range errs {
			fields[i] = api.FieldProblem{Field: e.Field, Problem: e.Problem}
		}
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidSpec, err.Error(), fields...)
		return
	}
	api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidSpec, err.Error())
}
