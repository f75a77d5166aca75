package events

// Deployment events of a deployment made from another one: written on the stream of
// the deployment that was resumed or run again, naming the new deployment. They are
// not deployment.resumed, which is the resume decision that ends a pause.
const (
	// DeploymentResumedAs carries RelatedDeploymentData: a new deployment resumes
	// this one from a step.
	DeploymentResumedAs Type = DeploymentPrefix + "resumed_as"
	// DeploymentRerunAs carries RelatedDeploymentData: a new deployment runs this
	// one's spec again.
	DeploymentRerunAs Type = DeploymentPrefix + "rerun_as"
)

// RelationTypes lists the event types of deployments made from another one.
var RelationTypes = []Type{DeploymentResumedAs, DeploymentRerunAs}

// RelatedDeploymentData is the data of deployment.resumed_as and
// deployment.rerun_as: the new deployment, how it relates to this one, the step a
// resume starts from (0-based, in this deployment's steps) and who asked.
type RelatedDeploymentData struct {
	NewDeploymentID string `json:"new_deployment_id"`
	Relation        string `json:"relation"`
	FromStep        *int   `json:"from_step,omitempty"`
	Actor           string `json:"actor,omitempty"`
}
