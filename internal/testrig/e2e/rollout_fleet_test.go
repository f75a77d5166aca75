package e2e_test

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	mantisapi "github.com/mantis-deploy/mantis/internal/contract/api"
)

// deployAll creates a one-step deployment on every target of the fleet whose command
// writes word to the target's ledger, through path (with its query), and returns the
// status code and body.
func (f *rolloutFleet) deployAll(t *testing.T, path, name, word string) (int, map[string]any) {
	t.Helper()
	spec := f.specJSON(t, `{"name":"`+name+`","targets":%[1]s,"steps":[{"name":"s","command":"echo `+word+` >> %[2]s/$MANTIS_TARGET"}]}`)
	return api(t, f.r, http.MethodPost, path, spec)
}

// requireEveryLedgerHas checks that word is in every target's ledger.
func (f *rolloutFleet) requireEveryLedgerHas(t *testing.T, word string) {
	t.Helper()
	for _, target := range f.targets {
		require.True(t, slices.Contains(f.ledger(t, target), word), "target %s never ran %s: %v", target, word, f.ledger(t, target))
	}
}

// On 20 real agents (half poll, half listen): a freeze refuses a deployment and an
// admin's override passes it; a webhook's delivery, refused while its receiver is
// down, arrives signed once it is back; a schedule fires and its deployment runs on
// every target.
func TestFreezeWebhookAndScheduleOnTwentyRealAgents(t *testing.T) {
	t.Parallel()
	f := setupRolloutFleet(t, 20)

	code, body := api(t, f.r, http.MethodPost, "/api/v1/freezes", `{"name":"fleet-freeze","reason":"release week"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, body = f.deployAll(t, "/api/v1/deployments", "frozen", "frozen")
	require.Equal(t, http.StatusConflict, code, body)
	require.Equal(t, string(mantisapi.CodeFrozen), body["code"])
	code, body = f.deployAll(t, "/api/v1/deployments?override_freeze=true", "overridden", "overridden")
	require.Equal(t, http.StatusAccepted, code, body)
	waitDeployment(t, f.r, body["id"].(string), "succeeded")
	f.requireEveryLedgerHas(t, "overridden")
	for _, target := range f.targets {
		require.NotContains(t, f.ledger(t, target), "frozen", "the refused deployment ran nothing")
	}
	code, _ = api(t, f.r, http.MethodDelete, "/api/v1/freezes/fleet-freeze", "")
	require.Equal(t, http.StatusNoContent, code)

	f.webhookArrivesOnceTheReceiverIsBack(t)

	name := uniqueName("fleet-every")
	spec := f.specJSON(t, `{"name":"fleet-scheduled","targets":%[1]s,"steps":[{"name":"s","command":"echo tick >> %[2]s/$MANTIS_TARGET"}]}`)
	code, created := apiRetrying503(t, f.r, http.MethodPost, "/api/v1/schedules", fmt.Sprintf(`{"name":%q,"every":"5s","spec":%s}`, name, spec))
	require.Equal(t, http.StatusCreated, code, created)
	t.Cleanup(func() { api(t, f.r, http.MethodDelete, "/api/v1/schedules/"+name, "") })
	require.Eventually(t, func() bool {
		code, list := api(t, f.r, http.MethodGet, "/api/v1/deployments?name=fleet-scheduled&status=succeeded", "")
		require.Equal(t, http.StatusOK, code, list)
		return len(list["deployments"].([]any)) > 0
	}, 3*time.Minute, 500*time.Millisecond, "no scheduled deployment succeeded")
	f.requireEveryLedgerHas(t, "tick")
}

// webhookArrivesOnceTheReceiverIsBack registers a webhook on a receiver that is down,
// runs a deployment on the fleet, sees the first attempt fail, brings the receiver up
// and waits for the signed delivery.
func (f *rolloutFleet) webhookArrivesOnceTheReceiverIsBack(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the receiver is down
	const secret = "e2e-fleet-webhook-secret"
	code, hook := api(t, f.r, http.MethodPost, "/api/v1/webhooks",
		fmt.Sprintf(`{"url":"http://%s/hook","event_types":["deployment.succeeded"],"secret":%q,"allow_private_network":true}`, addr, secret))
	require.Equal(t, http.StatusCreated, code, hook)
	code, body := f.deployAll(t, "/api/v1/deployments", "hooked", "hooked")
	require.Equal(t, http.StatusAccepted, code, body)
	id := body["id"].(string)
	waitDeployment(t, f.r, id, "succeeded")
	f.requireEveryLedgerHas(t, "hooked")
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1 AND attempts >= 1 AND status = 'pending'`,
			uuid.MustParse(hook["id"].(string))).Scan(&n))
		return n == 1
	}, time.Minute, 100*time.Millisecond, "the first attempt never failed")

	got := serveSignedWebhooks(t, addr, secret)
	select {
	case p := <-got:
		require.Equal(t, "deployment.succeeded", p.Type)
		require.Equal(t, id, p.DeploymentID.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the delivery never arrived after the receiver came back")
	}
}
