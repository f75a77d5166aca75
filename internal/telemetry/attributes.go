package telemetry

// Attribute keys of Mantis's own spans.
const (
	AttrCommandID         = "mantis.command.id"
	AttrDispatchRequestID = "mantis.dispatch_request.id"
	AttrDeploymentID      = "mantis.deployment.id"
	AttrTarget            = "mantis.target"
	AttrMode              = "mantis.target.mode"
	AttrPriority          = "mantis.command.priority"
	AttrExitCode          = "mantis.command.exit_code"
	AttrDurationMS        = "mantis.command.duration_ms"
	AttrTimedOut          = "mantis.command.timed_out"
)
