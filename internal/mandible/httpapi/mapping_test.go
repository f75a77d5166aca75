package httpapi

import (
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// requireNoZeroField fails for each field of v, recursively, that is zero: from a
// value with every field set (filled), a conversion that forgets a field leaves it
// zero. skip names fields ("Type.Field") the conversion drops on purpose.
func requireNoZeroField(t *testing.T, v any, skip ...string) {
	t.Helper()
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		require.False(t, v.IsZero(), "%s is not converted", path)
		switch v.Kind() {
		case reflect.Pointer:
			walk(v.Elem(), path)
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				walk(v.Index(0), path+"[0]")
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if f.IsExported() && !slices.Contains(skip, v.Type().Name()+"."+f.Name) {
					walk(v.Field(i), path+"."+f.Name)
				}
			}
		}
	}
	walk(reflect.ValueOf(v), reflect.TypeOf(v).Name())
}

// Each conversion from the store's rows to the API's types carries every field, so
// that the API answers what it answered when the rows were its types.
func TestConversionsToAPITypesCarryEveryField(t *testing.T) {
	t.Parallel()
	for name, converted := range map[string]any{
		"deployment":       deploymentOf(filled[schema.DeploymentView]()),
		"dispatch request": dispatchRequestOf(filled[schema.DispatchRequestView]()),
		"thorax instance":  thoraxInstanceOf(filled[schema.ThoraxInstanceView]()),
		"target":           targetOf(filled[schema.Target]()),
		"limit":            limitOf(filled[schema.Limit]()),
		"plan limit":       planLimitOf(filled[schema.LimitCoverage]()),
		"webhook":          webhookOf(filled[schema.Webhook]()),
		"webhook delivery": webhookDeliveryOf(filled[schema.WebhookDelivery]()),
		"freeze":           freezeOf(filled[schema.Freeze]()),
		"blocking freeze":  blockingFreezeOf(filled[schema.BlockingFreeze]()),
	} {
		t.Run(name, func(t *testing.T) { requireNoZeroField(t, converted) })
	}
}

// The bodies the store is handed carry every field the API reads, and only the
// record of the last write of a limit is dropped.
func TestConversionsFromAPIBodiesCarryEveryField(t *testing.T) {
	t.Parallel()
	requireNoZeroField(t, freezeDefinition(filled[api.NewFreeze]()))
	requireNoZeroField(t, newLimit(filled[api.Limit]()), "Limit.CreatedBy", "Limit.CreatedAt", "Limit.UpdatedAt")
}

// A 400 lists each problem of an input error by field, as the store named them.
func TestInputErrorsAnswerEachProblemByField(t *testing.T) {
	t.Parallel()
	var ps domain.Problems
	ps.Add("requests[0].target", "unknown target \"a: b\"")
	ps.Add("", "deployment_id and step_position go together")
	require.Equal(t, []api.FieldProblem{
		{Field: "requests[0].target", Problem: "unknown target \"a: b\""},
		{Field: "", Problem: "deployment_id and step_position go together"},
	}, fieldProblemsOf(ps))
	require.Nil(t, fieldProblemsOf(nil))
}
