package httpapi

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/schema"
)

func (s *server) getDispatchRequest(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		api.WriteError(w, r, http.StatusBadRequest, api.CodeInvalidArgument, "the request id is not a UUID",
			api.FieldProblem{Field: "id", Problem: "must be a UUID"})
		return
	}
	v, err := schema.DispatchRequestByID(r.Context(), s.db, id, s.heartbeatTimeout)
	if errors.Is(err, schema.ErrNotFound) {
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no dispatch request "+id.String())
		return
	}
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, dispatchRequestOf(v))
}
