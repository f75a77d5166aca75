package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// The token that created a deployment cannot approve it: its approve is refused
// with 403 and the deployment still waits, another token's approve goes through,
// and a step that sets allow_self_approval takes the author's approve.
func TestAuthorCannotApproveOwnDeployment(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"web-1": "prod"})

	gated := `{"name":"gated","targets":["web-1"],"steps":[{"name":"ok","kind":"approval"},{"name":"s","command":"true"}]}`
	var created api.CreatedDeployment
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments", fleetDeploy, gated, &created))
	c := runStandInWorker(t, created.ID.String())
	waitForApproval(t, c, created.ID.String())
	path := "/api/v1/deployments/" + created.ID.String() + "/decisions"

	var refused api.Problem
	require.Equal(t, http.StatusForbidden, b.call(t, "POST", path, fleetDeploy, `{"decision":"approve"}`, &refused))
	require.Equal(t, api.CodeForbidden, refused.Code)
	require.Contains(t, refused.Detail, `"ci" created this deployment and may not approve it`)
	var none api.DecisionList
	require.Equal(t, http.StatusOK, b.call(t, "GET", path, fleetRead, "", &none))
	require.Empty(t, none.Data, "a refused approve records nothing")

	var approved api.Decision
	require.Equal(t, http.StatusOK, b.call(t, "POST", path, fleetAdmin, `{"decision":"approve","comment":"reviewed"}`, &approved))
	require.Equal(t, "ops", approved.By)

	selfOK := `{"name":"solo","targets":["web-1"],"steps":[{"name":"ok","kind":"approval","allow_self_approval":true},{"name":"s","command":"true"}]}`
	var solo api.CreatedDeployment
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments", fleetDeploy, selfOK, &solo))
	waitForApproval(t, runStandInWorker(t, solo.ID.String()), solo.ID.String())
	require.Equal(t, http.StatusOK, b.call(t, "POST", "/api/v1/deployments/"+solo.ID.String()+"/decisions", fleetDeploy, `{"decision":"approve"}`, &approved))
	require.Equal(t, "ci", approved.By)
}
