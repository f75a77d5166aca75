package events

import "github.com/google/uuid"

// TargetOutput carries TargetOutputData: a chunk of a running command's output, as the
// agent streamed it. Output is best effort: the command's result carries the tail of
// its output whatever became of these chunks.
const TargetOutput Type = TargetPrefix + "output"

// Reset is the type of the event a stream sends first when it resumes from before the
// oldest event retention kept: the events in between are gone, and the client must
// reload what it shows instead of going on with a gap. It carries ResetData and the id
// of the last pruned event, so a client that reconnects after it resumes past the gap.
// It is never stored in the log.
const Reset Type = "reset"

// TargetOutputData is the data of target.output. Data is the chunk's bytes, whatever
// the command printed (base64 in JSON). Seq numbers the command's chunks from 0;
// Truncated marks the one chunk that says the command's bound was reached, after which
// nothing more of it is stored.
type TargetOutputData struct {
	DeploymentID *uuid.UUID `json:"deployment_id"`
	Step         *int       `json:"step"`
	Target       string     `json:"target"`
	RequestID    uuid.UUID  `json:"request_id"`
	CommandID    uuid.UUID  `json:"command_id"`
	Seq          int64      `json:"seq"`
	Data         []byte     `json:"data"`
	Truncated    bool       `json:"truncated,omitempty"`
}

// ResetData is the data of reset.
type ResetData struct {
	// PrunedThrough is the last event id retention deleted; the stream goes on after it.
	PrunedThrough int64 `json:"pruned_through"`
	// Reason says why, for people.
	Reason string `json:"reason"`
}
