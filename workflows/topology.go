package workflows

import (
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// DeclareTopology runs the topology activity on the replica's own task queue. A
// broker that is down is retried for a couple of minutes; a PRECONDITION_FAILED is not
// retried.
func DeclareTopology(ctx workflow.Context) (activityio.DeclareTopologyResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 2 * time.Minute,
		Summary:                "declare exchanges, queues and bindings of the mantis topology",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        15 * time.Second,
			NonRetryableErrorTypes: []string{activityio.TopologyPreconditionFailed, activityio.NoBroker},
		},
	})
	var res activityio.DeclareTopologyResult
	err := workflow.ExecuteActivity(ctx, activityio.DeclareTopology).Get(ctx, &res)
	return res, err
}
