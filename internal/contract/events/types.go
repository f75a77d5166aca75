// Package events is the contract of the deployment event log: the type of every
// event Mantis writes and the data each carries. Writers (schema, activities, the
// analysis processor) and readers (the SSE handler, mantisctl, tests) import these
// names instead of spelling the strings themselves.
//
// An event's type is "<subject>.<what>": deployment.*, step.* or target.*. A step's
// and a deployment's end is "<subject>.<status>" with the status of schema's state
// constants; the Ended helpers build those types.
//
// The package imports nothing from the project, so that schema can import it.
package events

import "strings"

// Type names what an event reports; it is the event log's type column and the SSE
// "event:" field.
type Type string

// Subject prefixes: every event type starts with one of them.
const (
	DeploymentPrefix = "deployment."
	StepPrefix       = "step."
	TargetPrefix     = "target."
)

// Deployment events. A deployment's end is deployment.<status>: succeeded, failed or
// cancelled.
const (
	// DeploymentStarted carries DeploymentStartedData.
	DeploymentStarted Type = DeploymentPrefix + "started"
	// DeploymentSucceeded carries DeploymentEndedData.
	DeploymentSucceeded Type = DeploymentPrefix + "succeeded"
	// DeploymentFailed carries DeploymentEndedData.
	DeploymentFailed Type = DeploymentPrefix + "failed"
	// DeploymentCancelled carries DeploymentEndedData.
	DeploymentCancelled Type = DeploymentPrefix + "cancelled"
	// DeploymentCancelRequested carries CancelRequestedData.
	DeploymentCancelRequested Type = DeploymentPrefix + "cancel_requested"
)

// Step events. A step's end is step.<status>: succeeded, failed, skipped or cancelled.
const (
	// StepStarted carries StepStartedData.
	StepStarted Type = StepPrefix + "started"
	// StepSucceeded carries StepEndedData.
	StepSucceeded Type = StepPrefix + "succeeded"
	// StepFailed carries StepEndedData.
	StepFailed Type = StepPrefix + "failed"
	// StepSkipped carries StepEndedData.
	StepSkipped Type = StepPrefix + "skipped"
	// StepCancelled carries StepEndedData.
	StepCancelled Type = StepPrefix + "cancelled"
)

// Target events: one target's command in a step, and a target's move between Thorax
// instances.
const (
	// TargetQueued carries TargetQueuedData.
	TargetQueued Type = TargetPrefix + "queued"
	// TargetRunning carries TargetRunningData.
	TargetRunning Type = TargetPrefix + "running"
	// TargetSucceeded carries TargetEndedData.
	TargetSucceeded Type = TargetPrefix + "succeeded"
	// TargetFailed carries TargetEndedData.
	TargetFailed Type = TargetPrefix + "failed"
	// TargetReassigned carries TargetReassignedData; it has no deployment.
	TargetReassigned Type = TargetPrefix + "reassigned"
	// TargetAnalysis carries TargetAnalysisData.
	TargetAnalysis Type = TargetPrefix + "analysis"
)

// All lists every event type written today.
var All = []Type{
	DeploymentStarted, DeploymentSucceeded, DeploymentFailed, DeploymentCancelled, DeploymentCancelRequested,
	StepStarted, StepSucceeded, StepFailed, StepSkipped, StepCancelled,
	TargetQueued, TargetRunning, TargetSucceeded, TargetFailed, TargetReassigned, TargetAnalysis, TargetOutput,
}

// DeploymentEnded is the type of the event that ends a deployment in status.
func DeploymentEnded(status string) Type { return Type(DeploymentPrefix + status) }

// StepEnded is the type of the event that ends a step in status.
func StepEnded(status string) Type { return Type(StepPrefix + status) }

// TargetEnded is the type of the event that reports a target's command ending in
// status (succeeded or failed).
func TargetEnded(status string) Type { return Type(TargetPrefix + status) }

// IsStep reports whether t is a step.* event.
func (t Type) IsStep() bool { return strings.HasPrefix(string(t), StepPrefix) }

// IsDeployment reports whether t is a deployment.* event.
func (t Type) IsDeployment() bool { return strings.HasPrefix(string(t), DeploymentPrefix) }

// What is the part of t after its subject: "started" for step.started.
func (t Type) What() string {
	_, what, _ := strings.Cut(string(t), ".")
	return what
}
