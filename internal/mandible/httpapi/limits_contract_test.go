package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// limitExchanges calls the concurrency limit routes and the one-request view, each
// through the document: a success and the main refusals.
func (b *contractBundle) limitExchanges(t *testing.T) {
	t.Helper()
	R, D, A := contractRead, contractDeploy, contractAdmin
	const prod = `{"name":"prod-two","scope":"label","label":"env","value":"prod","max_running":2}`
	for _, ex := range []exchange{
		{method: "POST", path: "/api/v1/limits", token: A, body: prod, want: 200},
		{method: "POST", path: "/api/v1/limits", token: D, body: prod, want: 403},
		{method: "POST", path: "/api/v1/limits", token: A, body: `{"name":"x","scope":"label","max_running":0}`, want: 400, invalid: true},
		{method: "GET", path: "/api/v1/limits", token: R, want: 200},
		{method: "GET", path: "/api/v1/limits/prod-two", token: R, want: 200},
		{method: "GET", path: "/api/v1/limits/ghost", token: R, want: 404},
		{method: "DELETE", path: "/api/v1/limits/target-default", token: A, want: 400},
		{method: "DELETE", path: "/api/v1/limits/prod-two", token: R, want: 403},
		{method: "DELETE", path: "/api/v1/limits/prod-two", token: A, want: 204},
		{method: "DELETE", path: "/api/v1/limits/prod-two", token: A, want: 404},
		{method: "GET", path: "/api/v1/dispatch-requests/not-a-uuid", token: R, want: 400, invalid: true},
		{method: "GET", path: "/api/v1/dispatch-requests/00000000-0000-0000-0000-000000000001", token: R, want: 404},
	} {
		b.call(t, ex)
	}
	var list struct {
		Requests []struct {
			ID string `json:"id"`
		} `json:"requests"`
	}
	require.NoError(t, json.Unmarshal(b.call(t, exchange{method: "GET", path: "/api/v1/dispatch-requests", token: R, want: 200}), &list))
	require.NotEmpty(t, list.Requests)
	b.call(t, exchange{method: "GET", path: "/api/v1/dispatch-requests/" + list.Requests[0].ID, token: R, want: 200})
}
