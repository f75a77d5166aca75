package schema

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EventFilter selects events from the deployment event log. Zero fields do not filter.
type EventFilter struct {
	DeploymentID *uuid.UUID
	// Types are exact event types ("step.started") or prefixes ending in ".*"
	// ("step.*"); an event matches when it matches any of them.
	Types []string
	// Targets match the text of the event's data->>'target'; an event matches when it
	// names any of them.
	Targets []string
}

// ReadEvents returns the events with after < id <= through that match f, in id order,
// at most limit of them.
//
// Ids are taken when a row is inserted, not when it commits, so a later call can
// return a row whose id is below one it returned before; callers that tail the log
// must hold back past gaps (see EventLogWriters).
func ReadEvents(ctx context.Context, db DB, after, through int64, f EventFilter, limit int) ([]Event, error) {
	var (
		sql  strings.Builder
		args = []any{after, through}
	)
	sql.WriteString(`SELECT id, deployment_id, type, data, created_at FROM deployment_events WHERE id > $1 AND id <= $2`)
	if f.DeploymentID != nil {
		args = append(args, *f.DeploymentID)
		fmt.Fprintf(&sql, ` AND deployment_id = $%d`, len(args))
	}
	if len(f.Types) > 0 {
		args = append(args, typePatterns(f.Types))
		fmt.Fprintf(&sql, ` AND type LIKE ANY ($%d::text[])`, len(args))
	}
	if len(f.Targets) > 0 {
		args = append(args, f.Targets)
		fmt.Fprintf(&sql, ` AND data->>'target' = ANY ($%d::text[])`, len(args))
	}
	args = append(args, limit)
	fmt.Fprintf(&sql, ` ORDER BY id LIMIT $%d`, len(args))

	rows, err := db.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.ID, &e.DeploymentID, &e.Type, &e.Data, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, err)
	}
	return events, nil
}

// typePatterns turns "step.*" into the LIKE pattern "step.%" and escapes the LIKE
// wildcard "_" that event types may contain.
func typePatterns(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		prefix, isPrefix := strings.CutSuffix(t, "*")
		p := strings.ReplaceAll(strings.ReplaceAll(prefix, `\`, `\\`), "_", `\_`)
		p = strings.ReplaceAll(p, "%", `\%`)
		if isPrefix {
			p += "%"
		}
		out[i] = p
	}
	return out
}

// LatestEventID returns the highest id committed to the event log, 0 when it is empty.
func LatestEventID(ctx context.Context, db DB) (int64, error) {
	var id int64
	if err := db.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM deployment_events`).Scan(&id); err != nil {
		return 0, fmt.Errorf("reading the latest event id: %w", err)
	}
	return id, nil
}

// EventLogWriters returns the virtual transaction ids of the transactions that hold a
// write lock on deployment_events.
//
// An INSERT takes that lock before it draws its id and keeps it until its transaction
// ends. So once a reader has seen the row with id M committed, every missing id below
// M belongs to a transaction in this list, read after that row, or is gone for good;
// when none of the listed transactions is running any more, the gaps below M are final.
func EventLogWriters(ctx context.Context, db DB) ([]string, error) {
	rows, err := db.Query(ctx, `
		SELECT DISTINCT virtualtransaction FROM pg_locks
		WHERE locktype = 'relation'
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND relation = 'deployment_events'::regclass
		  AND mode = 'RowExclusiveLock'`)
	if err != nil {
		return nil, fmt.Errorf("listing event log writers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing event log writers: %w", err)
	}
	return ids, nil
}
