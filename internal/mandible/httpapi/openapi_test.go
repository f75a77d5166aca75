package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

const contractSpec = `{"name":"contract","targets":["web-1"],"steps":[{"name":"s","command":"true"}]}`

// Every operation of the document answers, on the real handlers, as the document
// says: a success and its main errors (400, 401, 403, 404, 409, 503), each request
// and answer validated by kin-openapi against api/openapi.yaml.
func TestRoutesAnswerAsDocumented(t *testing.T) {
	t.Parallel()
	b := setupContract(t)
	missing := uuid.NewString()
	R, D, A := contractRead, contractDeploy, contractAdmin
	for _, ex := range []exchange{
		{method: "GET", path: api.OpenAPIPath, want: 200},
		{method: "GET", path: api.DeploymentSpecSchemaPath, want: 200},
		{method: "GET", path: "/healthz", want: 200},
		{method: "GET", path: "/readyz", want: 200},
		{method: "GET", path: "/version", want: 200},
		{method: "GET", path: "/metrics", want: 200},
		{method: "POST", path: "/api/v1/targets", token: A, body: `{"name":"web-1","mode":"poll","labels":{"role":"web"}}`, want: 200},
		{method: "POST", path: "/api/v1/targets", token: A, body: `{"name":"db 1","mode":"listen"}`, want: 400},
		{method: "POST", path: "/api/v1/targets", token: D, body: `{"name":"web-2","mode":"poll"}`, want: 403},
		{method: "GET", path: "/api/v1/targets", token: R, want: 200},
		{method: "GET", path: "/api/v1/targets?selector=role%3Dweb&limit=1", token: R, want: 200},
		{method: "GET", path: "/api/v1/targets?selector=role%3Dweb&limit=1&after=web-1", token: R, want: 200},
		{method: "GET", path: "/api/v1/targets?selector=role", token: R, want: 400},
		{method: "GET", path: "/api/v1/targets?limit=5000", token: R, want: 400, invalid: true},
		{method: "GET", path: "/api/v1/targets/web-1", token: R, want: 200},
		{method: "GET", path: "/api/v1/targets/ghost", token: R, want: 404},
		{method: "GET", path: "/api/v1/targets/web-1", want: 401, invalid: true},
		{method: "GET", path: "/api/v1/thorax-instances", token: R, want: 200},
		{method: "GET", path: "/api/v1/targets", want: 401, invalid: true},
		{method: "POST", path: "/api/v1/dispatch-requests", token: D, want: 202,
			body: `{"requests":[{"idempotency_key":"a","target":"web-1","command":"uptime","priority":"high","timeout":"30s"}]}`},
		{method: "POST", path: "/api/v1/dispatch-requests", token: D, body: `{"requests":[{"bogus":1}]}`, want: 400, invalid: true},
		{method: "POST", path: "/api/v1/dispatch-requests", token: R, want: 403,
			body: `{"requests":[{"idempotency_key":"b","target":"web-1","command":"uptime","priority":"","timeout":""}]}`},
		{method: "GET", path: "/api/v1/dispatch-requests?status=pending&target=web-1", token: R, want: 200},
		{method: "GET", path: "/api/v1/dispatch-requests?limit=0", token: R, want: 400, invalid: true},
		{method: "POST", path: "/api/v1/deployments", token: D, body: contractSpec, want: 202},
		{method: "POST", path: "/api/v1/deployments", token: D, body: `{"name":"","steps":[]}`, want: 400, invalid: true},
		{method: "POST", path: "/api/v1/deployments", token: R, body: contractSpec, want: 403},
		{method: "POST", path: "/api/v1/deployments", body: contractSpec, want: 401, invalid: true},
		{method: "GET", path: "/api/v1/deployments?status=pending&limit=10", token: R, want: 200},
		{method: "GET", path: "/api/v1/deployments?status=lost", token: R, want: 400},
		{method: "GET", path: "/api/v1/deployments/" + missing, token: R, want: 404},
		{method: "GET", path: "/api/v1/deployments/not-a-uuid", token: R, want: 400},
		{method: "POST", path: "/api/v1/deployments/" + missing + "/cancel", token: D, want: 404},
		{method: "POST", path: "/api/v1/deployments/" + missing + "/cancel", token: R, want: 403},
		{method: "GET", path: "/api/v1/dlq?limit=5", token: A, want: 200},
		{method: "GET", path: "/api/v1/dlq", token: D, want: 403},
		{method: "GET", path: "/api/v1/dlq", token: A, want: 503, base: b.noDLQ.URL},
		{method: "GET", path: "/api/v1/dlq?limit=5000", token: A, want: 400, invalid: true},
		{method: "POST", path: "/api/v1/dlq/requeue", token: A, body: `{"to":"high","limit":0}`, want: 200},
		{method: "POST", path: "/api/v1/dlq/requeue", token: A, body: `{"to":"urgent","limit":0}`, want: 400, invalid: true},
		{method: "POST", path: "/api/v1/dlq/purge", token: A, body: `{"confirm":true}`, want: 200},
		{method: "POST", path: "/api/v1/dlq/purge", token: A, body: `{"confirm":false}`, want: 400, invalid: true},
		{method: "GET", path: "/sse/events", token: R, want: 200, stream: true},
		{method: "GET", path: "/sse/events?types=step.*", token: R, want: 400},
		{method: "GET", path: "/sse/events", want: 401, invalid: true},
		{method: "GET", path: "/sse/deployments/" + missing, token: R, want: 200, stream: true},
		{method: "GET", path: "/sse/deployments/not-a-uuid", token: R, want: 400},
		{method: "DELETE", path: "/api/v1/targets/ghost", token: A, want: 404},
	} {
		b.call(t, ex)
	}
	b.deploymentLifecycle(t)
	b.fleetExchanges(t)
	b.limitExchanges(t)
	b.decisionExchanges(t)
	b.resumeExchanges(t)
	b.call(t, exchange{method: "DELETE", path: "/api/v1/targets/web-1", token: A, want: 204})
	for key, op := range operations(b.doc) {
		ok := false
		for status := range b.answered[key] {
			ok = ok || status < 300
		}
		require.True(t, ok, "%s (%s) was never answered with a success", key, op.OperationID)
	}
}

// deploymentLifecycle creates a deployment, reads it, creates it again under an
// idempotency key, and cancels it, each through the document.
func (b *contractBundle) deploymentLifecycle(t *testing.T) {
	key := http.Header{api.IdempotencyKeyHeader: {"contract-1"}}
	var created api.CreatedDeployment
	body := b.call(t, exchange{method: "POST", path: "/api/v1/deployments", token: contractDeploy, header: key, body: contractSpec, want: 202})
	require.NoError(t, json.Unmarshal(body, &created))
	asYAML := "name: contract\ntargets: [web-1]\nsteps: [{name: s, command: \"true\"}]\n"
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments", token: contractDeploy, header: key, body: asYAML,
		contentType: "application/yaml", want: 200})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments", token: contractDeploy, header: key,
		body: strings.Replace(contractSpec, `"true"`, `"false"`, 1), want: 409})
	b.call(t, exchange{method: "GET", path: "/api/v1/deployments/" + created.ID.String(), token: contractRead, want: 200})
	b.call(t, exchange{method: "GET", path: "/api/v1/deployments/" + created.ID.String() + "/output?target=web-1&step=0", token: contractRead, want: 200})
	b.call(t, exchange{method: "GET", path: "/api/v1/deployments/" + created.ID.String() + "/output?target=-not-a-name", token: contractRead, want: 400})
	b.call(t, exchange{method: "POST", path: "/api/v1/deployments/" + created.ID.String() + "/cancel", token: contractDeploy, want: 202})
}

// A routed path asked with a method the document does not list for it answers 405
// with Allow and a problem the document's Problem schema accepts; the document
// lists no such operation.
func TestWrongMethodAnswersAsDocumented(t *testing.T) {
	t.Parallel()
	b := setupContract(t)
	problem := b.doc.Components.Schemas["Problem"].Value
	for _, c := range []struct{ method, path string }{
		{"PUT", "/api/v1/deployments"}, {"DELETE", "/api/v1/deployments/" + uuid.NewString()},
		{"GET", "/api/v1/deployments/" + uuid.NewString() + "/cancel"}, {"PATCH", "/api/v1/targets"},
		{"PUT", "/api/v1/targets/web-1"}, {"DELETE", "/api/v1/dispatch-requests"}, {"POST", "/api/v1/dlq"},
		{"GET", "/api/v1/dlq/requeue"}, {"GET", "/api/v1/dlq/purge"}, {"POST", api.OpenAPIPath},
		{"POST", api.DeploymentSpecSchemaPath}, {"POST", "/sse/events"},
	} {
		req := b.request(t.Context(), t, exchange{method: c.method, path: c.path, token: contractAdmin})
		_, _, err := b.router.FindRoute(req)
		require.Error(t, err, "the document lists no %s %s", c.method, c.path)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var v any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		resp.Body.Close()
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", c.method, c.path)
		require.NotEmpty(t, resp.Header.Get("Allow"))
		require.Equal(t, api.ProblemContentType, resp.Header.Get("Content-Type"))
		require.NoError(t, problem.VisitJSON(v, openapi3.EnableJSONSchema2020()))
	}
}
