package events

import "time"

// Deployment events of human decisions: a deployment that waits for a person, the
// decision taken, and a pause and its resume.
const (
	// DeploymentWaiting carries WaitingData.
	DeploymentWaiting Type = DeploymentPrefix + "waiting"
	// DeploymentDecided carries DecisionData.
	DeploymentDecided Type = DeploymentPrefix + "decided"
	// DeploymentPaused carries DecisionData.
	DeploymentPaused Type = DeploymentPrefix + "paused"
	// DeploymentResumed carries DecisionData.
	DeploymentResumed Type = DeploymentPrefix + "resumed"
)

// DecisionTypes lists the event types of human decisions.
var DecisionTypes = []Type{DeploymentWaiting, DeploymentDecided, DeploymentPaused, DeploymentResumed}

// What a deployment waits for a person to decide (WaitingData.Kind).
const (
	// WaitApproval is an approval step waiting for approve or reject.
	WaitApproval = "approval"
	// WaitOnFailure is a failed on_failure: ask step waiting for retry, skip or abort.
	WaitOnFailure = "on_failure"
	// WaitPaused is a paused deployment waiting for resume.
	WaitPaused = "paused"
)

// WaitingData is the data of deployment.waiting: what the deployment waits for, at
// which step, who may decide (empty: any deploy token) and since when.
type WaitingData struct {
	Kind         string    `json:"kind"`
	StepPosition int       `json:"step"`
	Step         string    `json:"step_name,omitempty"`
	Approvers    []string  `json:"approvers,omitempty"`
	Since        time.Time `json:"since"`
	// Deadline is when an approval step decides on its own (on_timeout).
	Deadline *time.Time `json:"deadline,omitempty"`
}

// DecisionData is the data of deployment.decided, deployment.paused and
// deployment.resumed: who decided what, when, and at which step.
type DecisionData struct {
	Decision     string    `json:"decision"`
	By           string    `json:"by"`
	At           time.Time `json:"at"`
	StepPosition *int      `json:"step,omitempty"`
	Comment      string    `json:"comment,omitempty"`
}
