package schema

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordReplicaHeartbeat keeps replica's row in mandible_replicas current. recovered
// says the replica has just started or come back from a stall or a lost database:
// its healthy_since moves to now, and Thorax instances heartbeating through it get a
// full heartbeat timeout before any replica may declare them dead. A replica that
// was declared gone and beats again is running again.
func RecordReplicaHeartbeat(ctx context.Context, db DB, replica string, recovered bool) error {
	_, err := db.Exec(ctx, `
		INSERT INTO mandible_replicas (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET
		    last_seen_at = now(),
		    healthy_since = CASE WHEN $2 OR mandible_replicas.stopped_at IS NOT NULL OR mandible_replicas.ended_at IS NOT NULL
		                         THEN now() ELSE mandible_replicas.healthy_since END,
		    started_at = CASE WHEN mandible_replicas.stopped_at IS NOT NULL OR mandible_replicas.ended_at IS NOT NULL
		                      THEN now() ELSE mandible_replicas.started_at END,
		    stopped_at = NULL, ended_at = NULL, ended_by = NULL, end_reason = NULL`, replica, recovered)
	if err != nil {
		return fmt.Errorf("recording heartbeat of replica %s: %w", replica, err)
	}
	return nil
}

// MarkReplicaStopped records that replica stopped cleanly.
func MarkReplicaStopped(ctx context.Context, db DB, replica string) error {
	if _, err := db.Exec(ctx, `UPDATE mandible_replicas SET stopped_at = now() WHERE id = $1`, replica); err != nil {
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
	rows, err := db.Query(ctx, `
		SELECT id, last_seen_at FROM mandible_replicas
		WHERE id <> $1 AND ended_at IS NULL AND last_seen_at < now() - make_interval(secs => $2)
		ORDER BY last_seen_at`, self, goneAfter.Seconds())
	if err != nil {
		return nil, fmt.Errorf("listing gone replicas: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[GoneReplica])
	if err != nil {
		return nil, fmt.Errorf("listing gone replicas: %w", err)
	}
	return out, nil
}

// EndReplica records that replica's dispatcher was ended by another replica, for
// reason, provided it is still silent past goneAfter: a replica that came back in
// the meantime is left alone. It reports whether the row changed.
func EndReplica(ctx context.Context, db DB, replica, by, reason string, goneAfter time.Duration) (bool, error) {
	tag, err := db.Exec(ctx, `
		UPDATE mandible_replicas SET ended_at = now(), ended_by = $2, end_reason = $3
		WHERE id = $1 AND ended_at IS NULL AND last_seen_at < now() - make_interval(secs => $4)`,
		replica, by, reason, goneAfter.Seconds())
	if err != nil {
		return false, fmt.Errorf("recording end of replica %s: %w", replica, err)
	}
	return tag.RowsAffected() == 1, nil
}
