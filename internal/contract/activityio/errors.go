package activityio

// Temporal application error types of Mantis's activities and workflows. A retry
// policy names them in NonRetryableErrorTypes and a caller compares them with
// ApplicationError.Type(), so the writer and the readers import them from here.
const (
	// InvalidSpec is a deployment spec or step input that retrying cannot fix.
	InvalidSpec = "InvalidSpec"
	// InvalidInput is a dispatcher or dispatch activity input missing a required field.
	InvalidInput = "InvalidInput"
	// NoBroker is a topology declaration on a replica without a broker ([queue]
	// enabled = false).
	NoBroker = "NoBroker"
	// TopologyPreconditionFailed is a declaration the broker refused because a queue
	// exists with other arguments. It is not retried: only an operator can fix it.
	TopologyPreconditionFailed = "TopologyPreconditionFailed"
	// DeploymentFailed is the error type of a Deployment workflow that ran and failed.
	DeploymentFailed = "DeploymentFailed"
	// DeploymentEnded is a deployment whose workflow started after the deployment had
	// already ended (e.g. failed because its workflow had never started): it does not run.
	DeploymentEnded = "DeploymentEnded"
)
