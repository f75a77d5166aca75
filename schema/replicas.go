package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// RecordReplicaHeartbeat keeps replica's row in mandible_replicas current. recovered
// says the replica has just started or come back from a stall or a lost database:
// its healthy_since moves to now, and Thorax instances heartbeating through it get a
// full heartbeat timeout before any replica may declare them dead. A replica that
// was declared gone and beats again is running again.
func RecordReplicaHeartbeat(ctx context.Context, db DB, replica string, recovered bool) error {
	err := queries.RecordReplicaHeartbeat(ctx, db, dbsqlc.RecordReplicaHeartbeatParams{ID: replica, Recovered: recovered})
	if err != nil {
		return fmt.Errorf("recording heartbeat of replica %s: %w", replica, err)
	}
	return nil
}

// MarkReplicaStopped records that replica stopped cleanly.
func MarkReplicaStopped(ctx context.Context, db DB, replica string) error {
	if err := queries.MarkReplicaStopped(ctx, db, replica); err != nil {
		return fmt.Errorf("recording stop of replica %s: %w", replica, err)
	}
	return nil
}

// GoneReplica is a replica silent past the gone threshold whose dispatcher has not
// been ended yet.
type GoneReplica struct {
	ID         string
	LastSeenAt time.Time
}

// GoneReplicas lists replicas other than self that have been silent for longer than
// goneAfter and are not recorded as ended. A cleanly stopped replica is listed too:
// its dispatcher may have outlived it (the cancel at shutdown is best effort).
func GoneReplicas(ctx context.Context, db DB, self string, goneAfter time.Duration) ([]GoneReplica, error) {
	rows, err := queries.GoneReplicas(ctx, db, dbsqlc.GoneReplicasParams{Self: self, GoneAfter: goneAfter})
	if err != nil {
		return nil, fmt.Errorf("listing gone replicas: %w", err)
	}
	out := make([]GoneReplica, len(rows))
	for i, r := range rows {
		out[i] = GoneReplica{ID: r.ID, LastSeenAt: r.LastSeenAt}
	}
	return out, nil
}

// EndReplica records that replica's dispatcher was ended by another replica, for
// reason, provided it is still silent past goneAfter: a replica that came back in
// the meantime is left alone. It reports whether the row changed.
func EndReplica(ctx context.Context, db DB, replica, by, reason string, goneAfter time.Duration) (bool, error) {
	n, err := queries.EndReplica(ctx, db, dbsqlc.EndReplicaParams{ID: replica, EndedBy: by, EndReason: reason, GoneAfter: goneAfter})
	if err != nil {
		return false, fmt.Errorf("recording end of replica %s: %w", replica, err)
	}
	return n == 1, nil
}
