package httpapi

import (
	"net/http"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/schema"
)

// listThoraxInstances answers GET /api/v1/thorax-instances: each instance, whether it
// counts as live under the replica's heartbeat timeout, and how many targets it holds.
func (s *server) listThoraxInstances(w http.ResponseWriter, r *http.Request) {
	is, err := schema.ListThoraxInstances(r.Context(), s.db, s.heartbeatTimeout)
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.ThoraxInstanceList{Instances: mapped(is, thoraxInstanceOf)})
}
