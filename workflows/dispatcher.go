package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// DispatcherInput configures one replica's dispatch loop. It is carried across
// continue-as-new unchanged.
type DispatcherInput struct {
	ReplicaID string `json:"replica_id"`
	// PollInterval is the fallback tick ([dispatch] poll_interval, 30 s by default).
	PollInterval time.Duration `json:"poll_interval"`
	// BatchSize is the most requests one claim takes.
	BatchSize int `json:"batch_size"`
	// ProcessingTimeout bounds a delivery: past it the batch's rows are reclaimed anyway.
	ProcessingTimeout time.Duration `json:"processing_timeout"`
	// RoundsPerRun is how many claim rounds run before continue-as-new keeps the history
	// short (default 200).
	RoundsPerRun int `json:"rounds_per_run,omitempty"`
}

const defaultRoundsPerRun = 200

// defaultProcessingTimeout is the processing timeout of an input that sets none.
const defaultProcessingTimeout = 300 * time.Second

// Dispatcher is the per-replica dispatch loop: claim a batch, deliver it, then wait for
// the tick or a wake-up, going round again at once while batches come back full.
// Maintenance (orphan reclaim, expiry, undelivered commands) runs on every tick.
func Dispatcher(ctx workflow.Context, in DispatcherInput) error {
	if in.ReplicaID == "" || in.BatchSize <= 0 || in.PollInterval <= 0 {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("dispatcher input: replica_id, batch_size and poll_interval are required, got %+v", in), activityio.InvalidInput, nil)
	}
	rounds := in.RoundsPerRun
	if rounds <= 0 {
		rounds = defaultRoundsPerRun
	}
	processing := in.ProcessingTimeout
	if processing <= 0 {
		processing = defaultProcessingTimeout
	}
	wake := workflow.GetSignalChannel(ctx, WakeSignal)
	opts := newDispatcherOptions(processing)
	opts.local = workflow.GetVersion(ctx, localDispatchChangeID, workflow.DefaultVersion, localDispatchVersion) == localDispatchVersion

	lastMaintenance := time.Time{}
	for round := 0; round < rounds && !historyLong(ctx); round++ {
		if now := workflow.Now(ctx); now.Sub(lastMaintenance) >= in.PollInterval {
			maintain(ctx, opts.maintain, in.ReplicaID)
			lastMaintenance = now
		}
		claimed, err := claimAndDeliver(ctx, opts, in)
		untilTick := max(in.PollInterval-workflow.Now(ctx).Sub(lastMaintenance), time.Millisecond)
		switch {
		case errors.Is(err, errClaimFailed):
			untilTick = min(untilTick, claimRetryAfter)
		case err != nil:
			return err
		case claimed == in.BatchSize:
			continue // a full batch: more is likely waiting
		}
		waitForTickOrWake(ctx, wake, untilTick)
		if err := ctx.Err(); err != nil {
			return err // cancelled: the replica is shutting down
		}
	}
	// Buffered wake-ups are dropped: the next run claims first thing anyway.
	drain(wake)
	return workflow.NewContinueAsNewError(ctx, Dispatcher, in)
}

// dispatcherOptions are the activity options of the dispatch loop's activities.
type dispatcherOptions struct {
	claim, deliver, maintain workflow.ActivityOptions
	// local claims and delivers with local activities, with localOpts (runs of
	// localDispatchVersion).
	local     bool
	localOpts localDispatchOptions
}

// newDispatcherOptions builds the dispatch loop's activity options: a delivery is
// bounded by the processing timeout, and maintenance gives up after a few attempts.
func newDispatcherOptions(processing time.Duration) dispatcherOptions {
	retry := &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        10 * time.Second,
		NonRetryableErrorTypes: []string{activityio.InvalidInput},
	}
	// Maintenance must not hold up the claims behind it: a few attempts, then it waits for
	// the next tick.
	maintainRetry := *retry
	maintainRetry.MaximumAttempts = 3
	opts := dispatcherOptions{
		claim: workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry},
		// A delivery past the processing timeout is pointless: the rows are reclaimed and
		// its writes would be refused as stale.
		deliver: workflow.ActivityOptions{StartToCloseTimeout: 60 * time.Second, ScheduleToCloseTimeout: processing, RetryPolicy: retry},
		maintain: workflow.ActivityOptions{StartToCloseTimeout: 60 * time.Second, RetryPolicy: &maintainRetry,
			Summary: "reclaim orphans, expire " + domain.DispatchRequestTTLText + "-old requests, requeue undelivered commands"},
	}
	opts.localOpts = newLocalDispatchOptions(opts)
	return opts
}

// maintain runs the dispatch queue's maintenance; a failure waits for the next tick.
func maintain(ctx workflow.Context, opts workflow.ActivityOptions, replica string) {
	var m activityio.MaintainDispatchQueueResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), activityio.MaintainDispatchQueue,
		activityio.MaintainDispatchQueueInput{ReplicaID: replica}).Get(ctx, &m); err != nil {
		workflow.GetLogger(ctx).Warn("dispatch maintenance failed", "err", err)
	}
}

// claimAndDeliver claims a batch and delivers what it claimed, and returns how many
// requests it claimed. A failed delivery leaves the rows in processing, to be
// reclaimed after the processing timeout; a local claim that gave up returns
// errClaimFailed; a cancel or any other failed claim ends the run.
func claimAndDeliver(ctx workflow.Context, opts dispatcherOptions, in DispatcherInput) (int, error) {
	claim, err := executeClaim(ctx, opts, activityio.ClaimBatchInput{ReplicaID: in.ReplicaID, Limit: in.BatchSize},
		fmt.Sprintf("claim up to %d pending requests for replica %s", in.BatchSize, in.ReplicaID))
	if err != nil {
		return 0, err
	}
	n := len(claim.Claimed)
	if n == 0 {
		return 0, nil
	}
	err = executeDeliver(ctx, opts, activityio.DeliverBatchInput{ReplicaID: in.ReplicaID, Requests: claimRefs(claim.Claimed)},
		deliverSummary(claim.Claimed))
	if err != nil {
		if temporal.IsCanceledError(err) {
			return n, err // the replica is shutting down
		}
		// The rows stay in processing and are reclaimed after the processing timeout.
		workflow.GetLogger(ctx).Error("delivering claimed batch failed", "requests", n, "err", err)
	}
	return n, nil
}

// waitForTickOrWake waits until the tick, due in untilTick, or a wake-up, whichever
// comes first, then drops the wake-ups that arrived meanwhile: one round answers them
// all.
func waitForTickOrWake(ctx workflow.Context, wake workflow.ReceiveChannel, untilTick time.Duration) {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	tick := workflow.NewTimer(timerCtx, untilTick)
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(tick, func(workflow.Future) {})
	sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.Select(ctx)
	cancelTimer()
	drain(wake)
}

// historyLimitBytes continues a run as new well before Temporal's history limits,
// whatever the batch sizes.
const historyLimitBytes = 8 << 20

func historyLong(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistorySize() > historyLimitBytes
}

// drain consumes buffered wake-ups: one round answers them all.
func drain(c workflow.ReceiveChannel) {
	for c.ReceiveAsync(nil) {
	}
}

// deliverSummary is the one-line activity summary shown in the Web UI.
func deliverSummary(claimed []domain.ClaimedRequest) string {
	const shown = 3
	ids := make([]string, 0, shown)
	for _, c := range claimed[:min(shown, len(claimed))] {
		ids = append(ids, c.ID.String())
	}
	more := ""
	if len(claimed) > shown {
		more = fmt.Sprintf(" +%d more", len(claimed)-shown)
	}
	return fmt.Sprintf("deliver %d requests: %s%s", len(claimed), strings.Join(ids, ", "), more)
}
