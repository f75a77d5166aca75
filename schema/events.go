package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// Event is one entry of the durable deployment event log; its ID is the SSE event id.
type Event struct {
	ID           int64           `json:"id"`
	DeploymentID *uuid.UUID      `json:"deployment_id,omitempty"`
	Type         string          `json:"type"`
	Data         json.RawMessage `json:"data"`
	CreatedAt    time.Time       `json:"created_at"`
}

// InsertEvent appends an event of type typ, an events.Type (tests write others),
// with data, one of the events package's payloads. Call it in the transaction of the
// state change it reports, so the log never disagrees with the state.
func InsertEvent[T ~string](ctx context.Context, db DB, deploymentID *uuid.UUID, typ T, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encoding %s event: %w", typ, err)
	}
	if err := queries.InsertEvent(ctx, db, dbsqlc.InsertEventParams{
		DeploymentID: deploymentID, Type: string(typ), Data: b,
	}); err != nil {
		return fmt.Errorf("recording %s event: %w", typ, err)
	}
	return nil
}
