package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// A literal secret shorter than 4 bytes is accepted, but the create answer warns,
// naming it, that the agent will not mask it; a long one, or a reference, is not named.
func TestCreateDeploymentWarnsOfSecretsTooShortToMask(t *testing.T) {
	t.Parallel()
	c := newTestCodec(t)
	b, _, tsrv := secretSetup(t, c)

	code, body := b.do(t, http.MethodPost, "/api/v1/deployments", `{"name":"short","targets":["web-1"],"steps":[
		{"name":"s","command":"true","env_secret":{"PIN":"123","TOKEN":"s3cret-value","REF":"env:MANTIS_SECRET_X","TWO":"value:ab"}}]}`, true)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	require.Equal(t, []any{
		map[string]any{"field": "steps[0].env_secret.PIN", "warning": "shorter than 4 bytes: not masked in output"},
		map[string]any{"field": "steps[0].env_secret.TWO", "warning": "shorter than 4 bytes: not masked in output"},
	}, body["warnings"])
	terminate(t, tsrv, body["id"].(string))

	code, body = b.do(t, http.MethodPost, "/api/v1/deployments", secretSpec, true)
	require.Equal(t, http.StatusAccepted, code, "%v", body)
	require.NotContains(t, body, "warnings", "no warning for a secret long enough to mask")
	terminate(t, tsrv, body["id"].(string))
}

// terminate ends the workflow of deployment id, which no worker runs in these tests.
func terminate(t *testing.T, tsrv testenv.Temporal, id string) {
	t.Helper()
	tc, err := client.Dial(client.Options{HostPort: tsrv.Address, Namespace: tsrv.Namespace})
	require.NoError(t, err)
	defer tc.Close()
	require.NoError(t, tc.TerminateWorkflow(context.Background(), "deployment:"+id, "", "test over"))
}
