package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// claimKey names one claim, the same on every attempt of its activity: the dispatcher
// run and the activity's id within it. A local activity's id is its sequence number in
// the run, kept by its retries and by a replay of the workflow task that ran it; it is
// prefixed with localClaimPrefix, since a regular activity's id counts apart from it.
func claimKey(ctx context.Context) string {
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity {
		return info.WorkflowExecution.RunID + "/" + localClaimPrefix + info.ActivityID
	}
	return info.WorkflowExecution.RunID + "/" + info.ActivityID
}

// localClaimPrefix marks the claim key of a local activity's claim.
const localClaimPrefix = "local-"

// ClaimBatch claims pending dispatch requests for the replica (conditional UPDATE from
// pending to processing with a new claim epoch). A retry of a claim whose first attempt
// committed returns the rows that attempt claimed (schema.ClaimPendingFor).
func (a *Activities) ClaimBatch(ctx context.Context, in activityio.ClaimBatchInput) (activityio.ClaimBatchResult, error) {
	if in.ReplicaID == "" || in.Limit <= 0 {
		return activityio.ClaimBatchResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("claim input: replica_id required and limit positive, got %q and %d", in.ReplicaID, in.Limit), activityio.InvalidInput, nil)
	}
	a.Wakes.ClaimStarted()
	res, err := schema.ClaimPendingFor(ctx, a.DB, in.ReplicaID, claimKey(ctx), min(in.Limit, activityio.MaxClaimBatch))
	if err != nil {
		return activityio.ClaimBatchResult{}, err
	}
	a.Metrics.claimed(in.ReplicaID, len(res.Claimed), res.Lost)
	if len(res.Claimed) > 0 {
		a.Logger.InfoContext(ctx, "claimed dispatch requests", "replica_id", in.ReplicaID, "claimed", len(res.Claimed), "lost", res.Lost)
	}
	if a.Hooks.AfterClaim != nil {
		a.Hooks.AfterClaim(ctx)
	}
	return activityio.ClaimBatchResult{Claimed: res.Claimed, Lost: res.Lost}, nil
}

// maxReportedOutcomes bounds the outcomes a delivery reports one by one; the counts
// cover every request.
const maxReportedOutcomes = 100

// maxOutcomeError bounds the error text of a reported outcome.
const maxOutcomeError = 200

// nudgeOf is the broker message for a written command.
func nudgeOf(c domain.DispatchedCommand) broker.Nudge {
	n := broker.Nudge{CommandID: c.ID.String(), Target: c.Target, Mode: c.Mode, Priority: c.Priority, MaxRetries: c.MaxRetries,
		TraceParent: c.TraceParent}
	if c.AssignedInstanceID != nil {
		n.AssignedInstanceID = c.AssignedInstanceID.String()
	}
	return n
}

// DeliverBatch writes command_queue rows for the claimed requests and records each
// request's outcome, fenced by its epoch, in one transaction; then publishes the broker
// nudges. A nudge that cannot be published is logged and left to Thorax's polling: the
// row is the command, the nudge only makes it faster.
func (a *Activities) DeliverBatch(ctx context.Context, in activityio.DeliverBatchInput) (activityio.DeliverBatchResult, error) {
	if in.ReplicaID == "" {
		return activityio.DeliverBatchResult{}, temporal.NewNonRetryableApplicationError("deliver input: replica_id required", activityio.InvalidInput, nil)
	}
	outcomes, err := schema.DeliverClaimed(ctx, a.DB, in.ReplicaID, in.Requests, schema.DeliverOptions{HeartbeatTimeout: a.Dispatch.HeartbeatTimeout})
	if err != nil {
		return activityio.DeliverBatchResult{}, err
	}
	var nudges []broker.Nudge
	for _, o := range outcomes {
		switch o.Outcome {
		case domain.OutcomeDispatched:
			if o.Command != nil {
				nudges = append(nudges, nudgeOf(*o.Command))
				a.Metrics.dispatched(o.Queued)
			}
		case domain.OutcomeStale:
			a.Logger.WarnContext(ctx, "refused stale delivery outcome", "replica_id", in.ReplicaID, "request_id", o.RequestID, "reason", o.Error)
		}
	}
	res := summarizeDelivery(outcomes)
	a.Metrics.delivered(res)
	spans := startDeliverySpans(ctx, nudges)
	var publishErr error
	defer func() { spans.end(publishErr) }()
	if a.Broker != nil && len(nudges) > 0 {
		publishErr = a.Broker.Publish(ctx, nudges)
		switch err := publishErr; {
		case errors.Is(err, broker.ErrResting):
			a.Logger.DebugContext(ctx, "skipped command nudges while the broker is away; Thorax polling picks the commands up", "commands", len(nudges))
		case err != nil:
			a.Logger.WarnContext(ctx, "publishing command nudges failed; Thorax polling picks the commands up", "commands", len(nudges), "err", err)
		}
	}
	return res, nil
}

// MaintainDispatchQueue reclaims orphans held in processing past the processing
// timeout, expires requests older than domain.DispatchRequestTTL, and fails deliveries whose command no Thorax
// claimed within the delivery timeout. Every replica runs it on its tick; it is
// idempotent.
func (a *Activities) MaintainDispatchQueue(ctx context.Context, in activityio.MaintainDispatchQueueInput) (activityio.MaintainDispatchQueueResult, error) {
	var res activityio.MaintainDispatchQueueResult
	var errs []error
	var err error
	if res.Reclaimed, err = schema.ReclaimOrphans(ctx, a.DB, a.Dispatch.ProcessingTimeout); err != nil {
		errs = append(errs, err)
	}
	for _, r := range res.Reclaimed {
		a.Logger.WarnContext(ctx, "reclaimed orphaned dispatch request", "replica_id", in.ReplicaID,
			"request_id", r.ID, "old_holder", r.OldHolder, "new_epoch", r.NewEpoch)
	}
	if res.Expired, err = schema.ExpireRequests(ctx, a.DB); err != nil {
		errs = append(errs, err)
	}
	if res.Requeued, err = schema.RequeueUndelivered(ctx, a.DB, a.Dispatch.DeliveryTimeout); err != nil {
		errs = append(errs, err)
	}
	if res.Stranded, err = a.failStrandedDeployments(ctx); err != nil {
		errs = append(errs, err)
	}
	a.Metrics.maintained(res)
	if len(res.Reclaimed)+len(res.Expired)+len(res.Requeued) > 0 {
		a.Logger.InfoContext(ctx, "maintained dispatch queue", "replica_id", in.ReplicaID,
			"reclaimed", len(res.Reclaimed), "expired", len(res.Expired), "requeued", len(res.Requeued))
	}
	return res, errors.Join(errs...)
}

// summarizeDelivery counts outcomes and keeps up to maxReportedOutcomes of those not
// dispatched, with their error text bounded: the history gets what explains a batch, not
// one entry per request.
func summarizeDelivery(outcomes []domain.DeliveryOutcome) activityio.DeliverBatchResult {
	var res activityio.DeliverBatchResult
	for _, o := range outcomes {
		switch o.Outcome {
		case domain.OutcomeDispatched:
			res.Dispatched++
			continue
		case domain.OutcomeRetry:
			res.Retried++
		case domain.OutcomeFailed:
			res.Failed++
		case domain.OutcomeExpired:
			res.Expired++
		case domain.OutcomeStale:
			res.Stale++
		}
		if len(res.Outcomes) < maxReportedOutcomes {
			o.Command = nil
			if len(o.Error) > maxOutcomeError {
				o.Error = strings.ToValidUTF8(o.Error[:maxOutcomeError], "") + "…"
			}
			res.Outcomes = append(res.Outcomes, o)
		}
	}
	return res
}
