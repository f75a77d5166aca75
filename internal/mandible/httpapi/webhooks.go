package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/webhook"
	"github.com/mantis-deploy/mantis/schema"
)

// Limits of GET /api/v1/webhooks/{id}/failures.
const (
	defaultFailureList = 100
	maxFailureList     = 1000
)

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request) {
	var body api.NewWebhook
	if !decodeJSON(w, r, s.maxBody, &body) {
		return
	}
	if problems := webhook.Problems(body); len(problems) > 0 {
		writeInputError(w, r, &domain.InputError{Problems: problems})
		return
	}
	wh, err := schema.CreateWebhook(r.Context(), s.db, schema.NewWebhook{URL: body.URL, EventTypes: body.EventTypes, Secret: body.Secret,
		CreatedBy: actor(r), AllowPrivateNetwork: body.AllowPrivateNetwork})
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	s.logger.InfoContext(r.Context(), "webhook created", "webhook_id", wh.ID, "event_types", len(wh.EventTypes),
		"allow_private_network", wh.AllowPrivateNetwork, "actor", actor(r))
	api.WriteJSON(w, http.StatusCreated, webhookOf(wh))
}

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	hooks, err := schema.ListWebhooks(r.Context(), s.db)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.WebhookList{Webhooks: mapped(hooks, webhookOf)})
}

// getWebhook answers GET /api/v1/webhooks/{id}: one webhook, without its secret.
func (s *server) getWebhook(w http.ResponseWriter, r *http.Request) {
	id, ok := webhookID(w, r)
	if !ok {
		return
	}
	wh, err := schema.GetWebhook(r.Context(), s.db, id)
	if writeLookupError(w, r, s.logger, err, "no webhook "+id.String()) {
		return
	}
	api.WriteJSON(w, http.StatusOK, webhookOf(wh))
}

func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	id, ok := webhookID(w, r)
	if !ok {
		return
	}
	err := schema.DeleteWebhook(r.Context(), s.db, id)
	if writeLookupError(w, r, s.logger, err, "no webhook "+id.String()) {
		return
	}
	s.logger.InfoContext(r.Context(), "webhook deleted", "webhook_id", id, "actor", actor(r))
	w.WriteHeader(http.StatusNoContent)
}

// listWebhookFailures answers GET /api/v1/webhooks/{id}/failures?limit=N: the
// deliveries whose attempts are spent, newest first (the dead-letter list).
func (s *server) listWebhookFailures(w http.ResponseWriter, r *http.Request) {
	id, ok := webhookID(w, r)
	if !ok {
		return
	}
	limit := defaultFailureList
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxFailureList {
			api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "bad limit",
				api.FieldProblem{Field: "limit", Problem: fmt.Sprintf("must be 1-%d, got %.20q", maxFailureList, v)})
			return
		}
		limit = n
	}
	failed, err := schema.WebhookDeliveries(r.Context(), s.db, id, schema.WebhookDeliveryFailed, limit)
	if writeLookupError(w, r, s.logger, err, "no webhook "+id.String()) {
		return
	}
	api.WriteJSON(w, http.StatusOK, api.WebhookDeliveryList{Deliveries: mapped(failed, webhookDeliveryOf)})
}

// webhookID reads the {id} of a webhook route, answering 400 when it is no UUID.
func webhookID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "bad webhook id",
			api.FieldProblem{Field: "id", Problem: "must be a UUID"})
		return uuid.Nil, false
	}
	return id, true
}
