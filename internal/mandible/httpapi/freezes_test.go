package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

const prodSpec = `{"name":"ship","targets":["prod-1"],"steps":[{"name":"s","command":"true"}]}`

// An active freeze refuses a deployment on the targets it matches with 409 naming
// it and its reason, lets others through, and gives way to an admin's override,
// which is recorded on the deployment and in an event; a deploy token cannot
// override.
func TestFreezeRefusesAndAdminOverrides(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"prod-1": "prod", "stage-1": "stage"})
	freeze := `{"name":"quarter-close","reason":"books are closing","selector":{"env":"prod"},
		"weekly":{"days":["sun","mon","tue","wed","thu","fri","sat"],"from":"00:00","to":"00:00","timezone":"UTC"}}`
	require.Equal(t, http.StatusForbidden, b.call(t, "POST", "/api/v1/freezes", fleetDeploy, freeze, nil))
	var created api.Freeze
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/freezes", fleetAdmin, freeze, &created))
	require.True(t, created.Active)
	require.Equal(t, http.StatusConflict, b.call(t, "POST", "/api/v1/freezes", fleetAdmin, freeze, nil))

	var refused api.Problem
	require.Equal(t, http.StatusConflict, b.call(t, "POST", "/api/v1/deployments", fleetDeploy, prodSpec, &refused))
	require.Equal(t, api.CodeFrozen, refused.Code)
	require.Contains(t, refused.Detail, `"quarter-close" (books are closing`)
	require.Equal(t, []api.FieldProblem{{Field: "freezes.quarter-close", Problem: "books are closing"}}, refused.Fields)
	require.Zero(t, b.count(t, "deployments"))

	stage := `{"name":"ship","targets":["stage-1"],"steps":[{"name":"s","command":"true"}]}`
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments", fleetDeploy, stage, nil))

	require.Equal(t, http.StatusForbidden, b.call(t, "POST", "/api/v1/deployments?override_freeze=true", fleetDeploy, prodSpec, nil))
	require.Equal(t, http.StatusBadRequest, b.call(t, "POST", "/api/v1/deployments?override_freeze=yes", fleetAdmin, prodSpec, nil))
	var overridden api.CreatedDeployment
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments?override_freeze=true", fleetAdmin, prodSpec, &overridden))
	var by string
	var which []string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT freeze_override_by, freeze_overrides FROM deployments WHERE id = $1`, overridden.ID).Scan(&by, &which))
	require.Equal(t, "ops", by)
	require.Equal(t, []string{"quarter-close"}, which)
	var data string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT data::text FROM deployment_events WHERE deployment_id = $1 AND type = $2`, overridden.ID, events.DeploymentFreezeOverridden).Scan(&data))
	require.JSONEq(t, `{"actor":"ops","freezes":["quarter-close"],"reasons":["books are closing"]}`, data)

	var list api.FreezeList
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/freezes", fleetRead, "", &list))
	require.Len(t, list.Freezes, 1)
	require.Equal(t, map[string]string{"env": "prod"}, list.Freezes[0].Selector)
	require.Equal(t, http.StatusNoContent, b.call(t, "DELETE", "/api/v1/freezes/quarter-close", fleetAdmin, "", nil))
	require.Equal(t, http.StatusNotFound, b.call(t, "DELETE", "/api/v1/freezes/quarter-close", fleetAdmin, "", nil))
	other := `{"name":"ship-2","targets":["prod-1"],"steps":[{"name":"s","command":"true"}]}`
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments", fleetDeploy, other, nil))
}

// A freeze is refused with every bad field named; one over a closed period is not
// active.
func TestFreezeValidation(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	var p api.Problem
	require.Equal(t, http.StatusBadRequest, b.call(t, "POST", "/api/v1/freezes", fleetAdmin,
		`{"name":"x","reason":"","weekly":{"days":["caturday"],"from":"7pm","to":"08:00","timezone":"Nowhere/Land"}}`, &p))
	named := map[string]bool{}
	for _, f := range p.Fields {
		named[f.Field] = true
	}
	for _, f := range []string{"reason", "weekly.days[0]", "weekly.from", "weekly.timezone"} {
		require.True(t, named[f], "%s not named in %+v", f, p.Fields)
	}
	var past api.Freeze
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/freezes", fleetAdmin,
		`{"name":"past","reason":"over","starts_at":"2020-01-01T00:00:00Z","ends_at":"2020-01-02T00:00:00Z"}`, &past))
	require.False(t, past.Active)
}
