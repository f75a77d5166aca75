package domain

// The states each table's status column may hold. These constants are the one
// place code names a state; the lists below them are checked against the
// migrations' CHECK constraints by TestStatusConstantsMatchCheckConstraints, so a
// state added on one side and not the other fails the suite.

// Dispatch request states (pending_dispatch_requests.status).
const (
	// StatusPending waits for a replica's dispatcher to claim it (SKIP LOCKED).
	StatusPending = "pending"
	// StatusProcessing is claimed by one replica, which is delivering it; a claim
	// older than the claim timeout is reclaimed as an orphan.
	StatusProcessing = "processing"
	// StatusDispatched has its command written to command_queue.
	StatusDispatched = "dispatched"
	// StatusFailed spent its retry budget (a first delivery and ten retries).
	StatusFailed = "failed"
	// StatusExpired was not dispatched within DispatchRequestTTL of its creation.
	StatusExpired = "expired"
	// StatusCancelled ends a request whose deployment was cancelled before it was
	// dispatched.
	StatusCancelled = "cancelled"
)

// DispatchStatuses lists every dispatch request state.
var DispatchStatuses = []string{StatusPending, StatusProcessing, StatusDispatched, StatusFailed, StatusExpired, StatusCancelled}

// Deployment states (deployments.status).
const (
	DeploymentPending = "pending" // created; its workflow has not started a step
	DeploymentRunning = "running"
	// The three ends: every step succeeded; a step failed, or Mantis failed the
	// deployment (its events say why); or a user cancelled it.
	DeploymentSucceeded = "succeeded"
	DeploymentFailed    = "failed"
	DeploymentCancelled = "cancelled"
)

// DeploymentStatuses lists every deployment state.
var DeploymentStatuses = []string{DeploymentPending, DeploymentRunning, DeploymentSucceeded, DeploymentFailed, DeploymentCancelled}

// Step states (deployment_steps.status).
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
	// StepSkipped never started: a step before it failed or the deployment was
	// cancelled (SkipSteps).
	StepSkipped   = "skipped"
	StepCancelled = "cancelled"
)

// StepStatuses lists every step state.
var StepStatuses = []string{StepPending, StepRunning, StepSucceeded, StepFailed, StepSkipped, StepCancelled}

// Command states (command_queue.status). A command is lost when the Thorax
// instance holding it died before it reported a result.
const (
	CommandQueued    = "queued"
	CommandRunning   = "running"
	CommandSucceeded = "succeeded"
	CommandFailed    = "failed"
	CommandCancelled = "cancelled"
	CommandLost      = "lost"
)

// CommandStatuses lists every command state.
var CommandStatuses = []string{CommandQueued, CommandRunning, CommandSucceeded, CommandFailed, CommandCancelled, CommandLost}

// Thorax instance states (thorax_instances.status).
const (
	InstanceLive     = "live"
	InstanceDraining = "draining"
	InstanceDead     = "dead"
)

// InstanceStatuses lists every Thorax instance state.
var InstanceStatuses = []string{InstanceLive, InstanceDraining, InstanceDead}

// Analysis states (analyses.status).
const (
	AnalysisQueued = "queued"
	AnalysisDone   = "done"
	AnalysisFailed = "failed"
)

// AnalysisStatuses lists every analysis state.
var AnalysisStatuses = []string{AnalysisQueued, AnalysisDone, AnalysisFailed}
