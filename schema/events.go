package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Event is one entry of the durable deployment event log; its ID is the SSE event id.
type Event struct {
	ID           int64           `json:"id"`
	DeploymentID *uuid.UUID      `json:"deployment_id,omitempty"`
	Type         string          `json:"type"`
	Data         json.RawMessage `json:"data"`
	CreatedAt    time.Time       `json:"created_at"`
}

// InsertEvent appends an event. Call it in the transaction of the state change it
// reports, so the log never disagrees with the state.
func InsertEvent(ctx context.Context, db DB, deploymentID *uuid.UUID, typ string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encoding %s event: %w", typ, err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO deployment_events (deployment_id, type, data) VALUES ($1, $2, $3)`, deploymentID, typ, b); err != nil {
		return fmt.Errorf("recording %s event: %w", typ, err)
	}
	return nil
}
