package activityio

// Activities that took or returned a bare value have struct inputs and results under
// new names, so that a field can be added later without a new activity. The old names
// (CancelDeploymentWork, RetryStep, FinishDeployment, TouchedTargets) stay registered
// for the runs that scheduled them before; new runs take these behind the
// workflow.GetVersion change "struct-activity-io".
const (
	CancelDeployment    = "CancelDeployment"
	RetryStepRound      = "RetryStepRound"
	EndDeployment       = "EndDeployment"
	CountTouchedTargets = "CountTouchedTargets"
)

// CancelDeploymentInput names a deployment whose unfinished work is cancelled.
type CancelDeploymentInput struct {
	DeploymentID string `json:"deployment_id"`
}

// CancelDeploymentResult counts what was cancelled: requests not yet dispatched and
// commands not yet ended.
type CancelDeploymentResult struct {
	Cancelled int `json:"cancelled"`
}

// RetryStepRoundResult counts the targets that run again in the round.
type RetryStepRoundResult struct {
	Targets int `json:"targets"`
}

// EndDeploymentResult is the deployment's final state: the one asked for, unless the
// deployment had already ended (failed by a dead Thorax).
type EndDeploymentResult struct {
	Status string `json:"status"`
}

// CountTouchedTargetsResult counts the targets the deployment's steps reached.
type CountTouchedTargetsResult struct {
	Targets int `json:"targets"`
}
