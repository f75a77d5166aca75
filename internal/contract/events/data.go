package events

import "github.com/google/uuid"

// Keys of event data that readers filter on (SQL reads them as data->>'<key>').
const (
	// KeyTarget names the target an event is about.
	KeyTarget = "target"
	// KeyActor names the API token behind an event.
	KeyActor = "actor"
	// KeyDeploymentID and KeyCreatedAt are added to an event's data by the event
	// streams: its deployment (null for none) and when it was written.
	KeyDeploymentID = "deployment_id"
	KeyCreatedAt    = "created_at"
)

// DeploymentStartedData is the data of deployment.started.
type DeploymentStartedData struct {
	Targets []string `json:"targets"`
	Steps   int      `json:"steps"`
	// Actor is the API token that created the deployment, when one did.
	Actor string `json:"actor,omitempty"`
}

// DeploymentEndedData is the data of deployment.succeeded, deployment.failed and
// deployment.cancelled. The deployment's workflow writes Status and Reason; a
// deployment failed because its Thorax instance died carries DeploymentID, Reason and
// InstanceID instead.
type DeploymentEndedData struct {
	Status       string    `json:"status,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	DeploymentID uuid.UUID `json:"deployment_id,omitzero"`
	InstanceID   uuid.UUID `json:"instance_id,omitzero"`
}

// CancelRequestedData is the data of deployment.cancel_requested.
type CancelRequestedData struct {
	Actor string `json:"actor"`
}

// StepStartedData is the data of step.started.
type StepStartedData struct {
	Step         string `json:"step"`
	StepPosition int    `json:"step_position"`
	// Targets is how many targets the step runs on.
	Targets int `json:"targets"`
}

// StepEndedData is the data of step.<status>: the step's targets counted by outcome.
type StepEndedData struct {
	Step         string `json:"step"`
	StepPosition int    `json:"step_position"`
	Succeeded    int    `json:"succeeded"`
	Failed       int    `json:"failed"`
	Skipped      int    `json:"skipped"`
}

// TargetQueuedData is the data of target.queued: a dispatch request was enqueued.
type TargetQueuedData struct {
	StepPosition int       `json:"step_position"`
	Target       string    `json:"target"`
	RequestID    uuid.UUID `json:"request_id"`
}

// TargetRunningData is the data of target.running: a Thorax instance claimed the
// command.
type TargetRunningData struct {
	StepPosition *int      `json:"step_position"`
	Target       string    `json:"target"`
	CommandID    uuid.UUID `json:"command_id"`
	InstanceID   uuid.UUID `json:"instance_id"`
}

// TargetEndedData is the data of target.succeeded and target.failed. A command
// failed for running past its timeout carries no exit code or output: only
// StepPosition, Target, CommandID and Error.
type TargetEndedData struct {
	StepPosition    *int      `json:"step_position"`
	Target          string    `json:"target"`
	CommandID       uuid.UUID `json:"command_id"`
	ExitCode        *int      `json:"exit_code"`
	OutputTail      string    `json:"output_tail"`
	OutputTruncated bool      `json:"output_truncated"`
	Error           string    `json:"error,omitempty"`
}

// TargetReassignedData is the data of target.reassigned: a listen-mode target moved
// to another Thorax instance (To is nil when none was live).
type TargetReassignedData struct {
	Target         string     `json:"target"`
	FromInstanceID *uuid.UUID `json:"from_instance_id"`
	ToInstanceID   *uuid.UUID `json:"to_instance_id"`
	Reason         string     `json:"reason"`
}

// TargetAnalysisData is the data of target.analysis: a command's analysis.
type TargetAnalysisData struct {
	DeploymentID uuid.UUID `json:"deployment_id"`
	StepPosition *int      `json:"step_position"`
	Target       string    `json:"target"`
	CommandID    uuid.UUID `json:"command_id"`
	Category     string    `json:"category"`
	Summary      string    `json:"summary"`
	Suggestion   string    `json:"suggestion"`
	RefinedBy    string    `json:"refined_by"`
}
