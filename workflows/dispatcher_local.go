package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// localDispatchChangeID marks, through workflow.GetVersion, the dispatcher runs that
// claim and deliver with local activities. Runs started before it keep scheduling
// regular activities, so their histories still replay.
const localDispatchChangeID = "dispatch-local-activities"

// localDispatchVersion is the version of the runs that claim and deliver with local
// activities.
const localDispatchVersion workflow.Version = 1

// Local claims and deliveries run inside the dispatcher's workflow task, so a retry
// holds that task: a few short attempts, then the loop's next round. The longest backoff
// stays far below the workflow task timeout (10 s), so every retry runs in the same
// task under the same activity id, and a retried claim keeps its claim key.
const (
	localAttempts       = 3
	localInitialBackoff = 100 * time.Millisecond
	localMaxBackoff     = time.Second
)

// claimRetryAfter is how soon the loop looks again after a local claim gave up, unless
// a wake-up or the tick comes first.
const claimRetryAfter = 5 * time.Second

// errClaimFailed is returned by a round whose local claim gave up after its attempts.
var errClaimFailed = errors.New("claiming dispatch requests failed")

// localDispatchOptions are the local activity options of the claim and the delivery.
type localDispatchOptions struct {
	claim, deliver workflow.LocalActivityOptions
}

// newLocalDispatchOptions builds the local options: the same timeouts and
// non-retryable types as the regular ones, with short retries.
func newLocalDispatchOptions(regular dispatcherOptions) localDispatchOptions {
	retry := &temporal.RetryPolicy{
		InitialInterval:        localInitialBackoff,
		BackoffCoefficient:     2,
		MaximumInterval:        localMaxBackoff,
		MaximumAttempts:        localAttempts,
		NonRetryableErrorTypes: regular.claim.RetryPolicy.NonRetryableErrorTypes,
	}
	return localDispatchOptions{
		claim: workflow.LocalActivityOptions{StartToCloseTimeout: regular.claim.StartToCloseTimeout, RetryPolicy: retry},
		deliver: workflow.LocalActivityOptions{StartToCloseTimeout: regular.deliver.StartToCloseTimeout,
			ScheduleToCloseTimeout: regular.deliver.ScheduleToCloseTimeout, RetryPolicy: retry},
	}
}

// executeClaim claims a batch, as a local activity in runs of localDispatchVersion.
// A local claim that gave up after its attempts returns errClaimFailed: the loop goes
// on. Any other error (a cancel, invalid input) ends the run.
func executeClaim(ctx workflow.Context, opts dispatcherOptions, in activityio.ClaimBatchInput, summary string) (activityio.ClaimBatchResult, error) {
	var claim activityio.ClaimBatchResult
	if !opts.local {
		o := opts.claim
		o.Summary = summary
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), activityio.ClaimBatch, in).Get(ctx, &claim)
		return claim, err
	}
	o := opts.localOpts.claim
	o.Summary = summary
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, o), activityio.ClaimBatch, in).Get(ctx, &claim)
	if err == nil || temporal.IsCanceledError(err) || ctx.Err() != nil || isInvalidInput(err) {
		return claim, err
	}
	workflow.GetLogger(ctx).Warn("claiming dispatch requests failed; looking again soon", "attempts", localAttempts, "err", err)
	return activityio.ClaimBatchResult{}, errClaimFailed
}

// executeDeliver delivers a claimed batch, as a local activity in runs of
// localDispatchVersion.
func executeDeliver(ctx workflow.Context, opts dispatcherOptions, in activityio.DeliverBatchInput, summary string) error {
	var delivered activityio.DeliverBatchResult
	if !opts.local {
		o := opts.deliver
		o.Summary = summary
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), activityio.DeliverBatch, in).Get(ctx, &delivered)
	}
	o := opts.localOpts.deliver
	o.Summary = summary
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, o), activityio.DeliverBatch, in).Get(ctx, &delivered)
}

// isInvalidInput reports an activity refusing its input: retrying cannot help.
func isInvalidInput(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activityio.InvalidInput
}

// claimRefs is the id and epoch of each claimed request.
func claimRefs(claimed []domain.ClaimedRequest) []domain.ClaimRef {
	refs := make([]domain.ClaimRef, len(claimed))
	for i, c := range claimed {
		refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
	}
	return refs
}
