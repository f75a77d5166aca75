// Package activityio is the contract between Mandible's workflows and its activities:
// each activity's registered name, its input and result types, and the application
// error types a retry policy names. Workflows call activities by these names, so the
// workflow code never imports the activities package (and with it pgx and the broker);
// the activities package implements them under the same names, which is what the
// worker registers and what each workflow history records.
//
// A type's JSON is what histories hold: change it only in a way old histories still
// decode, and change what a workflow sends only behind workflow.GetVersion.
package activityio

// Activity names, as the worker registers them (the method names of
// activities.Activities) and as histories record them.
const (
	StartDeployment       = "StartDeployment"
	StartStep             = "StartStep"
	AdvanceStep           = "AdvanceStep"
	SkipSteps             = "SkipSteps"
	FinishStep            = "FinishStep"
	FinishDeployment      = "FinishDeployment"
	CancelDeploymentWork  = "CancelDeploymentWork"
	TouchedTargets        = "TouchedTargets"
	RecordDecision        = "RecordDecision"
	SetWaiting            = "SetWaiting"
	RetryStep             = "RetryStep"
	ClaimBatch            = "ClaimBatch"
	DeliverBatch          = "DeliverBatch"
	MaintainDispatchQueue = "MaintainDispatchQueue"
	DeclareTopology       = "DeclareTopology"
)

// Names lists every activity name, for the test that holds them to the registered
// methods.
var Names = []string{
	StartDeployment, StartStep, AdvanceStep, SkipSteps, FinishStep, FinishDeployment,
	CancelDeploymentWork, TouchedTargets, RecordDecision, SetWaiting, RetryStep,
	ClaimBatch, DeliverBatch, MaintainDispatchQueue, DeclareTopology,
	CancelDeployment, RetryStepRound, EndDeployment, CountTouchedTargets,
}
