package schema

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
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
	rows, err := queries.ReadEvents(ctx, db, dbsqlc.ReadEventsParams{
		After: after, Through: through, DeploymentID: f.DeploymentID,
		Types: typePatterns(f.Types), Targets: f.Targets, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, err)
	}
	events := make([]Event, len(rows))
	for i, r := range rows {
		events[i] = Event{ID: r.ID, DeploymentID: r.DeploymentID, Type: r.Type, Data: r.Data, CreatedAt: r.CreatedAt}
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
	id, err := queries.LatestEventID(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("reading the latest event id: %w", err)
	}
	return id, nil
}

// eventLogWritersSQL reads pg_locks, a system view sqlc does not know.
//
//go:embed embedded/event_log_writers.sql
var eventLogWritersSQL string

// EventLogWriters returns the virtual transaction ids of the transactions that hold a
// write lock on deployment_events.
//
// An INSERT takes that lock before it draws its id and keeps it until its transaction
// ends. So once a reader has seen the row with id M committed, every missing id below
// M belongs to a transaction in this list, read after that row, or is gone for good;
// when none of the listed transactions is running any more, the gaps below M are final.
func EventLogWriters(ctx context.Context, db DB) ([]string, error) {
	rows, err := db.Query(ctx, eventLogWritersSQL)
	if err != nil {
		return nil, fmt.Errorf("listing event log writers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing event log writers: %w", err)
	}
	return ids, nil
}
