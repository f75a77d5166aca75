package schema

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// ScheduleRedispatch answers a Thorax asking for another dispatch of a command it
// holds at epoch, or, at UnclaimedLeaseEpoch, of a queued command nobody claimed (its
// nudge failed for good): the command is cancelled and its request goes back to
// pending with attempts + 1 and a backoff — unless the budget is spent or the request
// expired, in which case Mandible refuses and the request ends failed or expired.
func ScheduleRedispatch(ctx context.Context, db DB, instance, command uuid.UUID, epoch int64, reason string) (domain.RedispatchResult, error) {
	if reason == "" {
		reason = "Thorax asked for another dispatch"
	}
	if epoch == UnclaimedLeaseEpoch {
		return scheduleUnclaimedRedispatch(ctx, db, instance, command, reason)
	}
	res, err := failDelivery(ctx, db, dbsqlc.FailDeliveriesParams{
		Match: matchHeld, CommandID: command, HolderID: instance, LeaseEpoch: epoch, Reason: reason,
	})
	if err != nil {
		return domain.RedispatchResult{}, err
	}
	if len(res) == 1 {
		return res[0], nil
	}
	exists, err := queries.CommandExists(ctx, db, command)
	if err != nil {
		return domain.RedispatchResult{}, fmt.Errorf("reading command %s: %w", command, err)
	}
	if !exists {
		return domain.RedispatchResult{}, ErrNotFound
	}
	return domain.RedispatchResult{}, ErrNotHeld
}

// scheduleUnclaimedRedispatch answers a live Thorax asking for another dispatch of a
// command that nobody holds (its nudge failed for good before any claim). It is fenced
// in the database: the command must still be queued and be its request's latest
// delivery. A command claimed or finished since, or one a newer delivery replaced, is
// refused with ErrNotHeld, and the budget stays Mandible's to spend or refuse.
func scheduleUnclaimedRedispatch(ctx context.Context, db DB, instance, command uuid.UUID, reason string) (domain.RedispatchResult, error) {
	if err := requireLive(ctx, db, instance); err != nil {
		return domain.RedispatchResult{}, err
	}
	// The last delivery's command is left queued rather than failed, since polling may
	// still claim it.
	res, err := failDelivery(ctx, db, dbsqlc.FailDeliveriesParams{Match: matchUnclaimed, CommandID: command, Reason: reason})
	if err != nil {
		return domain.RedispatchResult{}, err
	}
	if len(res) == 1 {
		return res[0], nil
	}
	return unclaimedRefusal(ctx, db, command)
}
