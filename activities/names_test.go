package activities_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
)

// The workflows call activities by the names in activityio; the worker registers the
// methods of Activities under their own names. A name without its method would fail
// every workflow that schedules it, at run time.
func TestActivityNamesAreTheRegisteredMethods(t *testing.T) {
	typ := reflect.TypeFor[*activities.Activities]()
	ctxType := reflect.TypeFor[context.Context]()
	var methods []string
	for m := range typ.Methods() {
		if m.Type.NumIn() > 1 && m.Type.In(1) == ctxType {
			methods = append(methods, m.Name)
		}
	}
	for _, name := range activityio.Names {
		if !slices.Contains(methods, name) {
			t.Errorf("activityio names %q, which Activities does not implement", name)
		}
	}
	for _, m := range methods {
		if !slices.Contains(activityio.Names, m) {
			t.Errorf("Activities.%s is registered as an activity but activityio does not name it", m)
		}
	}
}
