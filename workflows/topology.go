package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
)

// DeclareTopology runs the topology activity on the replica's own task queue. A
// broker that is down is retried for a couple of minutes; a PRECONDITION_FAILED is not
// retried.
func DeclareTopology(ctx workflow.Context) (activities.DeclareTopologyResult, error) {
	var a *activities.Activities
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 2 * time.Minute,
		Summary:                "declare exchanges, queues and bindings of the mantis topology",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        15 * time.Second,
			NonRetryableErrorTypes: []string{activities.TopologyPreconditionFailed, activities.NoBroker},
		},
	})
	var res activities.DeclareTopologyResult
	err := workflow.ExecuteActivity(ctx, a.DeclareTopology).Get(ctx, &res)
	return res, err
}
