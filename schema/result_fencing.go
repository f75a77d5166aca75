package schema

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// OutcomeBudgetSpent: Mandible refused another dispatch of an unclaimed command because
// it is its request's last delivery. The command stays queued: polling may still claim
// it, and delivery_timeout fails it otherwise.
const OutcomeBudgetSpent = "budget_spent"

// UnclaimedLeaseEpoch is the lease epoch a Thorax names when it asks for another
// dispatch of a command it never claimed: a broker nudge whose claims failed for good
// (seed "Retry Behaviour", step 4). No claim ever returns it: a claim moves a command's
// epoch to 1 or more.
const UnclaimedLeaseEpoch = 0

// resultRefusal explains a result in that stored nothing. A caller that neither holds
// the command nor names its target gets ErrNotOwn, whatever else holds, so that a
// refusal tells such a caller nothing of the command's lease. Otherwise it returns
// the status already stored when a result at that same epoch was recorded before (a
// replay, to be accepted), or ErrNotHeld saying why the result is refused: a stale
// epoch, or a command that ended without it. No refusal names an epoch.
func resultRefusal(ctx context.Context, db DB, in ResultToStore) (string, error) {
	command := in.Command
	lease, err := queries.CommandLease(ctx, db, command)
	if err != nil {
		return "", notFound(err)
	}
	holds := lease.HolderInstanceID != nil && *lease.HolderInstanceID == in.Instance
	switch {
	case holds, in.Target != "" && in.Target == lease.Target && lease.Mode == ModePoll:
	case in.Target == "":
		return "", fmt.Errorf("%w: instance %s does not hold command %s, and the result names no target it reports for", ErrNotOwn, in.Instance, command)
	case in.Target == lease.Target:
		return "", fmt.Errorf("%w: command %s runs in listen mode, and only the instance holding it reports it; instance %s does not hold it", ErrNotOwn, command, in.Instance)
	default:
		return "", fmt.Errorf("%w: command %s is not a command of target %s, and instance %s does not hold it", ErrNotOwn, command, in.Target, in.Instance)
	}
	cur, st := lease.LeaseEpoch, lease.Status
	switch {
	case cur != in.Epoch:
		return "", fmt.Errorf("%w: stale lease epoch: command %s was claimed again since and is %s", ErrNotHeld, command, st)
	case (st == domain.CommandSucceeded || st == domain.CommandFailed) && lease.Reported:
		return st, nil
	case st == domain.CommandFailed:
		// Mandible settled it without a result (overdue past its timeout).
		return "", fmt.Errorf("%w: command %s was failed by mandible before its result arrived; its result is refused", ErrNotHeld, command)
	case st == domain.CommandQueued:
		return "", fmt.Errorf("%w: command %s was handed back unrun and is queued", ErrNotHeld, command)
	}
	return "", fmt.Errorf("%w: command %s is %s; its result is refused", ErrNotHeld, command, st)
}

// unclaimedRefusal explains why another dispatch of an unclaimed command changed
// nothing: the command was claimed or finished since, a newer delivery replaced it,
// its request's budget is spent (OutcomeBudgetSpent, not an error), or a concurrent
// redispatch holds it.
func unclaimedRefusal(ctx context.Context, db DB, command uuid.UUID) (domain.RedispatchResult, error) {
	d, err := queries.CommandDelivery(ctx, db, command)
	if err != nil {
		return domain.RedispatchResult{}, notFound(err)
	}
	switch {
	case d.Status != domain.CommandQueued:
		return domain.RedispatchResult{}, fmt.Errorf("%w: command %s is %s: it was claimed or finished since", ErrNotHeld, command, d.Status)
	case d.DispatchAttempt != d.Attempts || d.RequestStatus != domain.StatusDispatched:
		return domain.RedispatchResult{}, fmt.Errorf("%w: command %s is delivery %d of its request, which is %s at %d failed deliveries: a newer delivery replaced it",
			ErrNotHeld, command, d.DispatchAttempt+1, d.RequestStatus, d.Attempts)
	case int(d.Attempts)+1 >= domain.MaxDispatchDeliveries:
		return domain.RedispatchResult{RequestID: d.RequestID, CommandID: command, Outcome: OutcomeBudgetSpent}, nil
	}
	// Locked by a concurrent redispatch (SKIP LOCKED): that one decides.
	return domain.RedispatchResult{}, fmt.Errorf("%w: command %s is being redispatched by another call", ErrNotHeld, command)
}
