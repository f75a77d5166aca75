package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// resumeExchanges resumes and re-runs a deployment that failed, through the
// document: a success, an idempotent repeat, and the refusals each route documents.
func (b *contractBundle) resumeExchanges(t *testing.T) {
	old := recordEndedDeployment(t, b.pool, domain.DeploymentFailed).String()
	missing := uuid.NewString()
	key := http.Header{api.IdempotencyKeyHeader: {"contract-resume-1"}}
	var resumed api.ResumedDeployment
	body := b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/resume", token: contractDeploy, header: key,
		body: `{"from_step":1,"failed_only":true}`, want: 202})
	require.NoError(t, json.Unmarshal(body, &resumed))
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/resume", token: contractDeploy, header: key,
		body: `{"from_step":1,"failed_only":true}`, want: 200})
	b.call(t, exchange{method: "GET", path: "/api/v1/deployments/" + resumed.ID.String(), token: contractRead, want: 200})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/resume", token: contractDeploy, body: `{"from_step":9}`, want: 400})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/resume", token: contractDeploy, body: `{"step":1}`, want: 400, invalid: true})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/resume", token: contractRead, want: 403})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + missing + "/resume", token: contractDeploy, want: 404})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + resumed.ID.String() + "/resume", token: contractDeploy, want: 409})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/rerun", token: contractDeploy, want: 202})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + resumed.ID.String() + "/rerun", token: contractDeploy, want: 409})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + missing + "/rerun", token: contractDeploy, want: 404})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + old + "/rerun", token: contractRead, want: 403})
}
