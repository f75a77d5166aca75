package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// maxDecisionBody bounds a decision's request body: a name and a comment.
const maxDecisionBody = 8 << 10

// decisionTimeout bounds how long a decision waits for the workflow to take and record
// it.
const decisionTimeout = 30 * time.Second

// decisionRoutes serves a deployment's decisions: listing them needs read, taking one
// needs deploy and a Temporal client.
func (s *server) decisionRoutes() []apiRoute {
	routes := []apiRoute{{"GET /api/v1/deployments/{id}/decisions", apitoken.ScopeRead, s.listDecisions}}
	if s.temporal != nil {
		routes = append(routes, apiRoute{"POST /api/v1/deployments/{id}/decisions", apitoken.ScopeDeploy, s.decide})
	}
	return routes
}

// listDecisions answers a deployment's recorded decisions, oldest first.
func (s *server) listDecisions(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDeployment(w, r)
	if !ok {
		return
	}
	list, err := schema.Decisions(r.Context(), s.db, d.ID)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.DecisionList{Data: list})
}

// decide sends the decision to the deployment's workflow as the Update of that name,
// by the workflow id so it reaches the current run, and answers the recorded decision.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDeployment(w, r)
	if !ok {
		return
	}
	var req api.DecisionRequest
	if !decodeJSON(w, r, maxDecisionBody, &req) || !validDecision(w, r, req) {
		return
	}
	if d.Status != domain.DeploymentPending && d.Status != domain.DeploymentRunning {
		api.WriteError(w, r, http.StatusConflict, api.CodeAlreadyFinished, fmt.Sprintf("deployment %s already ended %s", d.ID, d.Status))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), decisionTimeout)
	defer cancel()
	handle, err := s.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.DeploymentWorkflowID(d.ID.String()), UpdateName: req.Decision,
		Args:         []any{workflows.DecisionInput{By: actor(r), Comment: req.Comment, Author: isAuthor(r, d)}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var rec api.Decision
	if err == nil {
		err = handle.Get(ctx, &rec)
	}
	if err != nil {
		s.writeDecisionError(w, r, req.Decision, err)
		return
	}
	s.logger.InfoContext(r.Context(), "deployment decision taken", "deployment_id", d.ID, "decision", rec.Decision, "actor", rec.By)
	api.WriteJSON(w, http.StatusOK, rec)
}

// isAuthor reports whether the token deciding is the one that created d.
func isAuthor(r *http.Request, d schema.DeploymentView) bool {
	return d.CreatedBy != nil && *d.CreatedBy != "" && *d.CreatedBy == actor(r)
}

// validDecision refuses, answering 400, a decision that is not one of
// api.DecisionNames or whose comment cannot be stored.
func validDecision(w http.ResponseWriter, r *http.Request, req api.DecisionRequest) bool {
	if !slices.Contains(api.DecisionNames, req.Decision) {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "unknown decision",
			api.FieldProblem{Field: "decision", Problem: fmt.Sprintf("must be one of %s, got %q", strings.Join(api.DecisionNames, ", "), req.Decision)})
		return false
	}
	if problem := safetext.Unstorable(req.Comment, api.MaxDecisionComment); problem != "" {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "comment: "+problem, api.FieldProblem{Field: "comment", Problem: problem})
		return false
	}
	return true
}

// writeDecisionError answers a refused or failed Update: 403 for a token the step's
// approvers do not name or the author's approve of a step that does not allow it, 409 for a decision the deployment does not wait for (or a
// workflow that has ended), 400 for a malformed one, 500 otherwise.
func (s *server) writeDecisionError(w http.ResponseWriter, r *http.Request, decision string, err error) {
	var appErr *temporal.ApplicationError
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &appErr) && (appErr.Type() == workflows.DecisionNotApprover || appErr.Type() == workflows.DecisionSelfApproval):
		api.WriteError(w, r, http.StatusForbidden, api.CodeForbidden, appErr.Message())
	case errors.As(err, &appErr) && appErr.Type() == workflows.DecisionNotExpected:
		api.WriteError(w, r, http.StatusConflict, api.CodeNotWaiting, appErr.Message())
	case errors.As(err, &appErr) && appErr.Type() == workflows.DecisionInvalid:
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, appErr.Message())
	case errors.As(err, &notFound):
		api.WriteError(w, r, http.StatusConflict, api.CodeNotWaiting, decision+": the deployment's workflow is not running")
	default:
		writeServerError(w, r, s.logger, fmt.Errorf("sending decision %s: %w", decision, err))
	}
}
