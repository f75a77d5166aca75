package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// Page sizes of GET /api/v1/deployments.
const (
	defaultDeploymentPage = 50
	maxDeploymentPage     = 500
)

// links are the URLs of a deployment's resources.
func (s *server) links(id uuid.UUID) api.Links {
	l := api.Links{
		api.LinkSelf:   "/api/v1/deployments/" + id.String(),
		api.LinkCancel: "/api/v1/deployments/" + id.String() + "/cancel",
		api.LinkEvents: "/sse/deployments/" + id.String(),
	}
	if s.temporalUI != "" {
		l[api.LinkTemporal] = fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(s.temporalUI, "/"),
			url.PathEscape(s.namespace), url.PathEscape(workflows.DeploymentWorkflowID(id.String())))
	}
	return l
}

// findDeployment reads the deployment the path's {id} names, answering the error
// itself when there is none.
func (s *server) findDeployment(w http.ResponseWriter, r *http.Request) (schema.DeploymentView, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "id must be a UUID", api.FieldProblem{Field: "id", Problem: "must be a UUID"})
		return schema.DeploymentView{}, false
	}
	d, err := schema.GetDeployment(r.Context(), s.db, id)
	if errors.Is(err, schema.ErrNotFound) {
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no deployment "+id.String())
		return schema.DeploymentView{}, false
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return schema.DeploymentView{}, false
	}
	return d, true
}

func (s *server) getDeployment(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDeployment(w, r)
	if !ok {
		return
	}
	d.Spec = redactSpec(d.Spec)
	api.WriteJSON(w, http.StatusOK, api.DeploymentAnswer{Deployment: deploymentOf(d), Links: s.links(d.ID)})
}

func (s *server) listDeployments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := schema.DeploymentFilter{Name: q.Get("name")}
	var problems domain.Problems
	f.Statuses = statusesParam(q, &problems, domain.DeploymentStatuses)
	f.Limit = limitParam(q, &problems, maxDeploymentPage)
	f.Before = uuidParam(q, &problems, "before")
	if len(problems) > 0 {
		writeInputError(w, r, &domain.InputError{Problems: problems})
		return
	}
	ds, err := schema.ListDeployments(r.Context(), s.db, f)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	resp := api.DeploymentList{Deployments: nonNil(mapped(ds, deploymentOf))}
	if len(ds) == pageSize(f.Limit, defaultDeploymentPage) {
		resp.Next = "/api/v1/deployments?" + withBefore(q, ds[len(ds)-1].ID)
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

func (s *server) cancelDeployment(w http.ResponseWriter, r *http.Request) {
	d, ok := s.findDeployment(w, r)
	if !ok {
		return
	}
	id := d.ID
	if d.Status != domain.DeploymentPending && d.Status != domain.DeploymentRunning {
		api.WriteError(w, r, http.StatusConflict, api.CodeAlreadyFinished, "deployment "+id.String()+" already ended "+d.Status)
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
	api.WriteJSON(w, http.StatusAccepted, api.CancelAnswer{ID: id, Status: api.StatusCancelling, Links: s.links(id)})
}
