package api

import (
	"time"

	"github.com/google/uuid"
)

// OutputChunk is one stored chunk of a command's live output, an entry of
// GET /api/v1/deployments/{id}/output. Data is the bytes the command printed,
// base64-encoded in JSON; Seq numbers the command's chunks from 0; Truncated marks the
// chunk that says the command's bound was reached (nothing of it is stored after).
type OutputChunk struct {
	ID        int64     `json:"id"`
	Target    string    `json:"target"`
	Step      *int      `json:"step"`
	RequestID uuid.UUID `json:"request_id"`
	CommandID uuid.UUID `json:"command_id"`
	Seq       int64     `json:"seq"`
	Data      []byte    `json:"data"`
	Truncated bool      `json:"truncated"`
	CreatedAt time.Time `json:"created_at"`
}

// OutputPage is the answer to GET /api/v1/deployments/{id}/output: chunks in the order
// they were stored, and the path of the next page when this one is full.
type OutputPage struct {
	Chunks []OutputChunk `json:"chunks"`
	Next   string        `json:"next,omitempty"`
}
