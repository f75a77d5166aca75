package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// A freeze on every target refuses a raw dispatch request as it refuses a
// deployment: 409 frozen with nothing enqueued, a deploy token cannot override,
// and an admin's override enqueues it.
func TestFreezeRefusesRawDispatchRequests(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"prod-1": "prod", "stage-1": "stage"})
	everywhere := `{"name":"all-hands","reason":"incident under way",
		"weekly":{"days":["sun","mon","tue","wed","thu","fri","sat"],"from":"00:00","to":"00:00","timezone":"UTC"}}`
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/freezes", fleetAdmin, everywhere, nil))

	raw := `{"requests":[{"idempotency_key":"k1","target":"prod-1","command":"rm -rf /srv/app"},
		{"idempotency_key":"k2","target":"stage-1","command":"true"}]}`
	var refused api.Problem
	require.Equal(t, http.StatusConflict, b.call(t, "POST", "/api/v1/dispatch-requests", fleetDeploy, raw, &refused))
	require.Equal(t, api.CodeFrozen, refused.Code)
	require.Contains(t, refused.Detail, `"all-hands" (incident under way; 2 targets`)
	require.Equal(t, []api.FieldProblem{{Field: "freezes.all-hands", Problem: "incident under way"}}, refused.Fields)
	require.Zero(t, b.count(t, "pending_dispatch_requests"), "a frozen target's command is never enqueued")

	require.Equal(t, http.StatusForbidden, b.call(t, "POST", "/api/v1/dispatch-requests?override_freeze=true", fleetDeploy, raw, nil))
	require.Zero(t, b.count(t, "pending_dispatch_requests"))

	var enqueued api.EnqueueAnswer
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/dispatch-requests?override_freeze=true", fleetAdmin, raw, &enqueued))
	require.Len(t, enqueued.Requests, 2)
	require.Equal(t, 2, b.count(t, "pending_dispatch_requests"))

	require.Equal(t, http.StatusNoContent, b.call(t, "DELETE", "/api/v1/freezes/all-hands", fleetAdmin, "", nil))
	thawed := `{"requests":[{"idempotency_key":"k3","target":"prod-1","command":"true"}]}`
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/dispatch-requests", fleetDeploy, thawed, nil))
}
