package httpapi_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// The schemas of freezes, plans, webhooks and schedules join schemaTypes here, so
// that TestSchemasMatchGoTypes holds them to their Go types too.
func init() {
	for name, typ := range map[string]reflect.Type{
		"NewFreeze": reflect.TypeFor[api.NewFreeze](), "WeeklyWindow": reflect.TypeFor[api.WeeklyWindow](),
		"Freeze": reflect.TypeFor[api.Freeze](), "FreezeList": reflect.TypeFor[api.FreezeList](),
		"BlockingFreeze": reflect.TypeFor[api.BlockingFreeze](), "DeploymentPlan": reflect.TypeFor[api.DeploymentPlan](),
		"PlanStep": reflect.TypeFor[api.PlanStep](), "PlanLimit": reflect.TypeFor[api.PlanLimit](),
		"NewWebhook": reflect.TypeFor[api.NewWebhook](), "Webhook": reflect.TypeFor[api.Webhook](),
		"WebhookList": reflect.TypeFor[api.WebhookList](), "WebhookDelivery": reflect.TypeFor[api.WebhookDelivery](),
		"WebhookDeliveryList": reflect.TypeFor[api.WebhookDeliveryList](), "NewSchedule": reflect.TypeFor[api.NewSchedule](),
		"Schedule": reflect.TypeFor[api.Schedule](), "ScheduleList": reflect.TypeFor[api.ScheduleList](),
	} {
		schemaTypes[name] = typ
	}
}

// fleetExchanges calls the freeze, plan, webhook and schedule operations through the
// document: a success and their main refusals each. It expects the target web-1.
func (b *contractBundle) fleetExchanges(t *testing.T) {
	R, D, A := contractRead, contractDeploy, contractAdmin
	freeze := `{"name":"contract-freeze","reason":"contract test","selector":{"role":"web"},
		"weekly":{"days":["mon","tue","wed","thu","fri","sat","sun"],"from":"00:00","to":"00:00","timezone":"UTC"}}`
	hook := `{"url":"https://hooks.example/contract","event_types":["deployment.*"],"secret":"0123456789abcdef"}`
	schedule := `{"name":"contract","cron":"0 3 * * *","spec":` + contractSpec + `}`
	for _, ex := range []exchange{
		{method: "POST", path: "/api/v1/deployments?dry_run=true", token: D, body: contractSpec, want: 200},
		{method: "POST", path: "/api/v1/freezes", token: A, body: freeze, want: 201},
		{method: "POST", path: "/api/v1/freezes", token: A, body: freeze, want: 409},
		{method: "POST", path: "/api/v1/freezes", token: D, body: freeze, want: 403},
		{method: "POST", path: "/api/v1/freezes", token: A, body: `{"name":"x","reason":""}`, want: 400},
		{method: "GET", path: "/api/v1/freezes", token: R, want: 200},
		{method: "GET", path: "/api/v1/freezes/contract-freeze", token: R, want: 200},
		{method: "GET", path: "/api/v1/freezes/ghost", token: R, want: 404},
		{method: "POST", path: "/api/v1/deployments", token: D, body: contractSpec, want: 409},
		{method: "POST", path: "/api/v1/deployments?override_freeze=true", token: D, body: contractSpec, want: 403},
		{method: "POST", path: "/api/v1/deployments?override_freeze=true", token: A, body: contractSpec, want: 202},
		{method: "DELETE", path: "/api/v1/freezes/contract-freeze", token: A, want: 204},
		{method: "DELETE", path: "/api/v1/freezes/contract-freeze", token: A, want: 404},
		{method: "POST", path: "/api/v1/webhooks", token: A, body: `{"url":"ftp://x","event_types":["step.*"],"secret":"0123456789abcdef"}`, want: 400},
		{method: "GET", path: "/api/v1/webhooks", token: A, want: 200},
		{method: "GET", path: "/api/v1/webhooks", token: R, want: 403},
		{method: "POST", path: "/api/v1/schedules", token: A, body: schedule, want: 201},
		{method: "POST", path: "/api/v1/schedules", token: A, body: schedule, want: 409},
		{method: "GET", path: "/api/v1/schedules", token: R, want: 200},
		{method: "GET", path: "/api/v1/schedules/contract", token: R, want: 200},
		{method: "DELETE", path: "/api/v1/schedules/contract", token: A, want: 204},
		{method: "DELETE", path: "/api/v1/schedules/contract", token: A, want: 404},
		{method: "GET", path: "/api/v1/schedules/contract", token: R, want: 404},
	} {
		b.call(t, ex)
	}
	var created api.Webhook
	require.NoError(t, json.Unmarshal(b.call(t, exchange{method: "POST", path: "/api/v1/webhooks", token: A, body: hook, want: 201}), &created))
	id := created.ID.String()
	b.call(t, exchange{method: "GET", path: "/api/v1/webhooks/" + id + "/failures?limit=10", token: A, want: 200})
	b.call(t, exchange{method: "GET", path: "/api/v1/webhooks/" + id, token: A, want: 200})
	b.call(t, exchange{method: "GET", path: "/api/v1/webhooks/" + id, token: R, want: 403})
	b.call(t, exchange{method: "GET", path: "/api/v1/webhooks/not-a-uuid", token: A, want: 400})
	b.call(t, exchange{method: "DELETE", path: "/api/v1/webhooks/" + id, token: A, want: 204})
	b.call(t, exchange{method: "GET", path: "/api/v1/webhooks/" + id, token: A, want: 404})
	b.call(t, exchange{method: "GET", path: "/api/v1/webhooks/" + id + "/failures", token: A, want: 404})
	b.call(t, exchange{method: "DELETE", path: "/api/v1/webhooks/" + id, token: A, want: 404})
}
