package activityio

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
)

// deploymentNamespace derives deployment ids from workflow ids that are not
// "deployment:<uuid>" (deployments started straight from a Temporal client).
var deploymentNamespace = uuid.MustParse("6d616e74-6973-4000-8000-6465706c6f79")

// DeploymentWorkflowIDPrefix prefixes the workflow id of a deployment started by
// Mandible, "deployment:<uuid>" (workflows.DeploymentWorkflowID).
const DeploymentWorkflowIDPrefix = "deployment:"

// DeploymentIDFor returns the deployment id of a workflow: the spec's when set, the
// uuid in a "deployment:<uuid>" workflow id, or one derived from the workflow id.
func DeploymentIDFor(workflowID string, s spec.Deployment) (uuid.UUID, error) {
	if s.DeploymentID != "" {
		id, err := uuid.Parse(s.DeploymentID)
		if err != nil {
			return uuid.Nil, fmt.Errorf("deployment_id: must be a UUID, got %q", s.DeploymentID)
		}
		return id, nil
	}
	if rest, ok := strings.CutPrefix(workflowID, DeploymentWorkflowIDPrefix); ok {
		if id, err := uuid.Parse(rest); err == nil {
			return id, nil
		}
	}
	return uuid.NewSHA1(deploymentNamespace, []byte(workflowID)), nil
}

// StartDeploymentInput is the spec and the workflow running it.
type StartDeploymentInput struct {
	WorkflowID string          `json:"workflow_id"`
	Spec       spec.Deployment `json:"spec"`
	// CountOnly leaves the target names out of the result: the workflow keeps each
	// step's window on the database side and needs only how many there are.
	CountOnly bool `json:"count_only,omitempty"`
}

// StartDeploymentResult names the deployment and counts the targets it runs on. Targets
// lists them, unless the input asked for the count only.
type StartDeploymentResult struct {
	DeploymentID string   `json:"deployment_id"`
	Targets      []string `json:"targets"`
	TargetCount  int      `json:"target_count,omitempty"`
}

// StepInput names a step of a deployment.
type StepInput struct {
	DeploymentID string `json:"deployment_id"`
	Position     int    `json:"position"`
}

// StartStepInput starts a step.
type StartStepInput struct {
	StepInput
	Targets int `json:"targets"`
}

// FinishStepInput ends a step.
type FinishStepInput struct {
	StepInput
	Status    string `json:"status"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped,omitempty"`
}

// FinishDeploymentInput ends a deployment.
type FinishDeploymentInput struct {
	DeploymentID string `json:"deployment_id"`
	Status       string `json:"status"`
	Reason       string `json:"reason,omitempty"`
}

// AdvanceStepInput names a step whose window to keep, and how long one call may wait.
type AdvanceStepInput struct {
	StepInput
	// MaxWait bounds the call; the workflow calls again while the step is not done.
	MaxWait time.Duration `json:"max_wait"`
	// Window narrows the step to a rollout's batch, failure room, or a rollback's or
	// verify's targets; the zero window is the whole step.
	Window domain.StepWindow `json:"window,omitzero"`
}

// AdvanceStepResult is where the step stands: counts and up to 20 failed targets,
// never the list of targets, whatever their number.
type AdvanceStepResult = domain.StepProgress

// SkipStepsInput names the first step of a deployment that will not run.
type SkipStepsInput struct {
	DeploymentID string `json:"deployment_id"`
	From         int    `json:"from"`
}

// TouchedTargetsInput names a deployment and how many steps its spec has.
type TouchedTargetsInput struct {
	DeploymentID string `json:"deployment_id"`
	Steps        int    `json:"steps"`
}
