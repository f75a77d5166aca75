package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mantis-deploy/mantis/activities"
	"github.com/mantis-deploy/mantis/schema"
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

// Dispatcher is the per-replica dispatch loop: claim a batch, deliver it, then wait for
// the tick or a wake-up, going round again at once while batches come back full.
// Maintenance (orphan reclaim, expiry, undelivered commands) runs on every tick.
func Dispatcher(ctx workflow.Context, in DispatcherInput) error {
	if in.ReplicaID == "" || in.BatchSize <= 0 || in.PollInterval <= 0 {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("dispatcher input: replica_id, batch_size and poll_interval are required, got %+v", in), "InvalidInput", nil)
	}
	rounds := in.RoundsPerRun
	if rounds <= 0 {
		rounds = defaultRoundsPerRun
	}
	processing := in.ProcessingTimeout
	if processing <= 0 {
		processing = 300 * time.Second
	}
	logger := workflow.GetLogger(ctx)
	wake := workflow.GetSignalChannel(ctx, WakeSignal)
	var a *activities.Activities

	retry := &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        10 * time.Second,
		NonRetryableErrorTypes: []string{"InvalidInput"},
	}
	claimOpts := workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry}
	// A delivery past the processing timeout is pointless: the rows are reclaimed and its
	// writes would be refused as stale.
	deliverOpts := workflow.ActivityOptions{StartToCloseTimeout: 60 * time.Second, ScheduleToCloseTimeout: processing, RetryPolicy: retry}
	// Maintenance must not hold up the claims behind it: a few attempts, then it waits for
	// the next tick.
	maintainRetry := *retry
	maintainRetry.MaximumAttempts = 3
	maintainOpts := workflow.ActivityOptions{StartToCloseTimeout: 60 * time.Second, RetryPolicy: &maintainRetry,
		Summary: "reclaim orphans, expire 24h-old requests, requeue undelivered commands"}

	lastMaintenance := time.Time{}
	for round := 0; round < rounds && !historyLong(ctx); round++ {
		if now := workflow.Now(ctx); now.Sub(lastMaintenance) >= in.PollInterval {
			var m activities.MaintainDispatchQueueResult
			if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, maintainOpts), a.MaintainDispatchQueue,
				activities.MaintainDispatchQueueInput{ReplicaID: in.ReplicaID}).Get(ctx, &m); err != nil {
				logger.Warn("dispatch maintenance failed", "error", err)
			}
			lastMaintenance = now
		}

		claimOpts.Summary = fmt.Sprintf("claim up to %d pending requests for replica %s", in.BatchSize, in.ReplicaID)
		var claim activities.ClaimBatchResult
		if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, claimOpts), a.ClaimBatch,
			activities.ClaimBatchInput{ReplicaID: in.ReplicaID, Limit: in.BatchSize}).Get(ctx, &claim); err != nil {
			return err
		}
		if n := len(claim.Claimed); n > 0 {
			refs := make([]schema.ClaimRef, n)
			for i, c := range claim.Claimed {
				refs[i] = schema.ClaimRef{ID: c.ID, Epoch: c.Epoch}
			}
			deliverOpts.Summary = deliverSummary(claim.Claimed)
			var delivered activities.DeliverBatchResult
			if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, deliverOpts), a.DeliverBatch,
				activities.DeliverBatchInput{ReplicaID: in.ReplicaID, Requests: refs}).Get(ctx, &delivered); err != nil {
				if temporal.IsCanceledError(err) {
					return err // the replica is shutting down
				}
				// The rows stay in processing and are reclaimed after the processing timeout.
				logger.Error("delivering claimed batch failed", "requests", n, "error", err)
			}
		}
		if len(claim.Claimed) == in.BatchSize {
			continue // a full batch: more is likely waiting
		}

		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		untilTick := max(in.PollInterval-workflow.Now(ctx).Sub(lastMaintenance), time.Millisecond)
		tick := workflow.NewTimer(timerCtx, untilTick)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(tick, func(workflow.Future) {})
		sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sel.Select(ctx)
		cancelTimer()
		drain(wake)
		if err := ctx.Err(); err != nil {
			return err // cancelled: the replica is shutting down
		}
	}
	// Buffered wake-ups are dropped: the next run claims first thing anyway.
	drain(wake)
	return workflow.NewContinueAsNewError(ctx, Dispatcher, in)
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
func deliverSummary(claimed []schema.ClaimedRequest) string {
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
