package schema

import (
	"context"
	"fmt"

	"github.com/google/uuid"
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

// resultRefusal explains a result at epoch that stored nothing. It returns the status
// already stored when a result at that same epoch was recorded before (a replay, to be
// accepted), and otherwise ErrNotHeld saying why the result is refused: a stale epoch,
// or a command that ended without it.
func resultRefusal(ctx context.Context, db DB, command uuid.UUID, epoch int64) (string, error) {
	var (
		cur      int64
		st       string
		reported bool
	)
	err := db.QueryRow(ctx, `SELECT lease_epoch, status, result_instance_id IS NOT NULL FROM command_queue WHERE id = $1`, command).
		Scan(&cur, &st, &reported)
	if err != nil {
		return "", notFound(err)
	}
	switch {
	case cur != epoch:
		return "", fmt.Errorf("%w: stale lease epoch %d, current %d (command %s is %s)", ErrNotHeld, epoch, cur, command, st)
	case (st == "succeeded" || st == "failed") && reported:
		return st, nil
	case st == "failed":
		// Mandible settled it without a result (overdue past its timeout).
		return "", fmt.Errorf("%w: command %s was failed by mandible at lease epoch %d before its result arrived; its result is refused", ErrNotHeld, command, cur)
	case st == "queued":
		return "", fmt.Errorf("%w: command %s was handed back unrun at lease epoch %d and is queued", ErrNotHeld, command, cur)
	}
	return "", fmt.Errorf("%w: command %s is %s at lease epoch %d; its result is refused", ErrNotHeld, command, st, cur)
}

// scheduleUnclaimedRedispatch answers a live Thorax asking for another dispatch of a
// command that nobody holds (its nudge failed for good before any claim). It is fenced
// in the database: the command must still be queued and be its request's latest
// delivery. A command claimed or finished since, or one a newer delivery replaced, is
// refused with ErrNotHeld, and the budget stays Mandible's to spend or refuse.
func scheduleUnclaimedRedispatch(ctx context.Context, db DB, instance, command uuid.UUID, reason string) (RedispatchResult, error) {
	if err := requireLive(ctx, db, instance); err != nil {
		return RedispatchResult{}, err
	}
	// $2 is MaxDispatchDeliveries: the last delivery's command is left queued rather
	// than failed, since polling may still claim it.
	res, err := failDelivery(ctx, db, reason, `c.id = $3 AND c.status = 'queued' AND p.attempts + 1 < $2`, command)
	if err != nil {
		return RedispatchResult{}, err
	}
	if len(res) == 1 {
		return res[0], nil
	}
	var (
		st, reqStatus     string
		attempt, attempts int
		requestID         uuid.UUID
	)
	err = db.QueryRow(ctx, `
		SELECT c.status, c.dispatch_attempt, p.attempts, p.status, p.id
		FROM command_queue c JOIN pending_dispatch_requests p ON p.id = c.dispatch_request_id
		WHERE c.id = $1`, command).Scan(&st, &attempt, &attempts, &reqStatus, &requestID)
	if err != nil {
		return RedispatchResult{}, notFound(err)
	}
	switch {
	case st != "queued":
		return RedispatchResult{}, fmt.Errorf("%w: command %s is %s: it was claimed or finished since", ErrNotHeld, command, st)
	case attempt != attempts || reqStatus != StatusDispatched:
		return RedispatchResult{}, fmt.Errorf("%w: command %s is delivery %d of its request, which is %s at %d failed deliveries: a newer delivery replaced it",
			ErrNotHeld, command, attempt+1, reqStatus, attempts)
	case attempts+1 >= MaxDispatchDeliveries:
		return RedispatchResult{RequestID: requestID, CommandID: command, Outcome: OutcomeBudgetSpent}, nil
	}
	// Locked by a concurrent redispatch (SKIP LOCKED): that one decides.
	return RedispatchResult{}, fmt.Errorf("%w: command %s is being redispatched by another call", ErrNotHeld, command)
}
