package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// Webhooks are created, listed without their secret, refused when their URL is not
// http(s), and deleted by an admin only; their failed deliveries are listed.
func TestWebhooksAPI(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	hook := `{"url":"https://hooks.example/mantis","event_types":["deployment.*","step.failed"],"secret":"0123456789abcdef-secret"}`
	require.Equal(t, http.StatusForbidden, b.call(t, "POST", "/api/v1/webhooks", fleetDeploy, hook, nil))
	var bad api.Problem
	require.Equal(t, http.StatusBadRequest, b.call(t, "POST", "/api/v1/webhooks", fleetAdmin,
		`{"url":"file:///etc/passwd","event_types":["target.queued"],"secret":"x"}`, &bad))
	named := map[string]bool{}
	for _, f := range bad.Fields {
		named[f.Field] = true
	}
	require.Equal(t, map[string]bool{"url": true, "event_types[0]": true, "secret": true}, named)
	long := `{"url":"https://x/` + strings.Repeat("a", 9000) + `","event_types":["step.*"],"secret":"0123456789abcdef"}`
	require.Equal(t, http.StatusRequestEntityTooLarge, b.call(t, "POST", "/api/v1/webhooks", fleetAdmin, long, nil))

	var created api.Webhook
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/webhooks", fleetAdmin, hook, &created))
	var list map[string][]map[string]any
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/webhooks", fleetAdmin, "", &list))
	require.Len(t, list["webhooks"], 1)
	require.NotContains(t, list["webhooks"][0], "secret")
	require.Equal(t, "ops", list["webhooks"][0]["created_by"])
	require.Equal(t, false, list["webhooks"][0]["allow_private_network"], "a webhook reaches public addresses only unless it says so")
	var private api.Problem
	for host, kind := range map[string]string{"10.0.0.5": "private", "169.254.169.254": "link-local", "[::1]:8080": "loopback", "localhost": "loopback"} {
		require.Equal(t, http.StatusBadRequest, b.call(t, "POST", "/api/v1/webhooks", fleetAdmin,
			`{"url":"http://`+host+`/hook","event_types":["step.*"],"secret":"0123456789abcdef"}`, &private), host)
		require.Len(t, private.Fields, 1, host)
		require.Equal(t, "url", private.Fields[0].Field, host)
		require.Contains(t, private.Fields[0].Problem, "is a "+kind+" address: set allow_private_network", host)
	}
	var inside api.Webhook
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/webhooks", fleetAdmin,
		`{"url":"http://10.0.0.5/hook","event_types":["step.*"],"secret":"0123456789abcdef","allow_private_network":true}`, &inside))
	require.True(t, inside.AllowPrivateNetwork)
	require.Equal(t, http.StatusNoContent, b.call(t, "DELETE", "/api/v1/webhooks/"+inside.ID.String(), fleetAdmin, "", nil))

	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO deployment_events (type) VALUES ('deployment.failed')`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO webhook_deliveries (webhook_id, event_id, status, attempts, last_status, last_error)
		SELECT $1, max(id), 'failed', 8, 503, 'receiver answered 503' FROM deployment_events`, created.ID)
	require.NoError(t, err)
	var failures api.WebhookDeliveryList
	path := "/api/v1/webhooks/" + created.ID.String() + "/failures"
	require.Equal(t, http.StatusOK, b.call(t, "GET", path, fleetAdmin, "", &failures))
	require.Len(t, failures.Deliveries, 1)
	require.Equal(t, "deployment.failed", failures.Deliveries[0].EventType)
	require.Equal(t, 8, failures.Deliveries[0].Attempts)
	require.Equal(t, http.StatusBadRequest, b.call(t, "GET", path+"?limit=0", fleetAdmin, "", nil))
	require.Equal(t, http.StatusForbidden, b.call(t, "GET", path, fleetRead, "", nil))

	require.Equal(t, http.StatusNoContent, b.call(t, "DELETE", "/api/v1/webhooks/"+created.ID.String(), fleetAdmin, "", nil))
	require.Equal(t, http.StatusNotFound, b.call(t, "GET", path, fleetAdmin, "", nil))
	require.Equal(t, http.StatusNotFound, b.call(t, "DELETE", "/api/v1/webhooks/"+created.ID.String(), fleetAdmin, "", nil))
	require.Equal(t, http.StatusBadRequest, b.call(t, "DELETE", "/api/v1/webhooks/not-a-uuid", fleetAdmin, "", nil))
}
